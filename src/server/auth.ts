/** Credentials (CONTRACT §2): Bearer or x-api-key; scopes checked before any id is looked at. */
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { AppError } from '../domain/errors.js';
import type { Scope } from '../domain/scopes.js';
import type { KeyService } from '../services/keys.js';

export interface Principal {
  accountId: string;
  keyId: string;
  scopes: readonly Scope[];
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

const unauthenticated = () => new AppError('authentication_required', 'Authentication is required.');

/**
 * The one secret the request presents, or null when it presents none or two different ones. Every header
 * line counts: Node keeps only the first of repeated `Authorization` lines, so read the raw lines.
 */
export function presentedKey(request: FastifyRequest): string | null | undefined {
  const candidates = new Set<string>();
  const raw = request.raw.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!.trim();
    if (name === 'authorization') {
      const match = /^Bearer\s+(\S+)$/i.exec(value);
      if (match) candidates.add(match[1]!);
    } else if (name === 'x-api-key' && value !== '') {
      candidates.add(value);
    }
  }
  if (candidates.size > 1) return null;
  return candidates.values().next().value;
}

export function authenticator(keys: KeyService) {
  return function requireScope(scope: Scope): onRequestAsyncHookHandler {
    return async function authenticate(request) {
      const secret = presentedKey(request);
      if (!secret) throw unauthenticated();
      const key = await keys.authenticate(secret);
      if (!key) throw unauthenticated();
      if (!key.scopes.includes(scope)) {
        throw new AppError('insufficient_scope', `This API key lacks the ${scope} permission.`, {
          requiredPermission: scope,
        });
      }
      request.principal = { accountId: key.accountId, keyId: key.id, scopes: key.scopes };
    };
  };
}
