/**
 * COFFER_TRUST_PROXY (docs/deploy.md#client-addresses-behind-a-proxy) as one function, given to Fastify as its
 * `trustProxy` (which X-Forwarded-For hops `request.ip` believes) and used by Coffer itself where it must know
 * whether a request came through a listed proxy at all: its connection's peer address is in the list. A header the
 * client sends never decides that.
 */
import proxyAddr from '@fastify/proxy-addr';
import type { FastifyRequest } from 'fastify';

/** Whether `address` is a trusted proxy (the hop number is that of Fastify's API; the list ignores it). */
export type ProxyTrust = (address: string, hop: number) => boolean;

/** The trust function of the configured list (addresses, CIDR ranges, loopback/linklocal/uniquelocal); none: nothing. */
export function proxyTrust(list: readonly string[]): ProxyTrust {
  return list.length > 0 ? proxyAddr.compile([...list]) : () => false;
}

/** Whether the request's connection comes from a trusted proxy (its socket's peer address; no header is read). */
export function fromTrustedProxy(request: FastifyRequest, trust: ProxyTrust): boolean {
  const peer = request.raw.socket?.remoteAddress;
  return peer !== undefined && trust(peer, 0);
}
