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

/** The one secret the request presents, or null when it presents none or two different ones. */
export function presentedKey(request: FastifyRequest): string | null | undefined {
  const candidates = new Set<string>();
  const authorization = request.headers.authorization;
  if (typeof authorization === 'string') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match) candidates.add(match[1]!);
  }
  const apiKeyHeader = request.headers['x-api-key'];
  if (typeof apiKeyHeader === 'string' && apiKeyHeader.trim() !== '') candidates.add(apiKeyHeader.trim());
  if (Array.isArray(apiKeyHeader)) return null;
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
