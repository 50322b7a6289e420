/**
 * Credentials (docs/api-rules.md#scopes): Bearer or x-api-key, or else the console's browser session (the 401
 * hint names it; src/console/session-http.ts) with an owner's scopes; scopes checked before any id is looked at.
 */
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { AppError } from '../domain/errors.js';
import type { Scope } from '../domain/scopes.js';
import type { KeyService } from '../services/keys.js';

export interface Principal {
  accountId: string;
  keyId: string;
  scopes: readonly Scope[];
  /** An append-only key (src/domain/append-only.ts); a console session never is (append-only keys cannot open one). */
  appendOnly: boolean;
  /** Set when the credential is a console session. */
  sessionId?: string;
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

/** A credential other than an API key: its principal, undefined when the request carries none; throws to refuse. */
export type SessionCredential = (request: FastifyRequest) => Promise<Principal | undefined>;

export function authenticator(keys: KeyService, session?: SessionCredential) {
  return function requireScope(scope: Scope): onRequestAsyncHookHandler {
    return async function authenticate(request) {
      const secret = presentedKey(request);
      let principal: Principal | undefined;
      if (secret) {
        const key = await keys.authenticate(secret);
        if (key) principal = { accountId: key.accountId, keyId: key.id, scopes: key.scopes, appendOnly: key.appendOnly };
      } else if (secret === undefined && session) {
        // No API key header at all: the browser session is the third credential.
        principal = await session(request);
      }
      if (!principal) throw unauthenticated();
      if (!principal.scopes.includes(scope)) {
        throw new AppError('insufficient_scope', `This API key lacks the ${scope} permission.`, {
          requiredPermission: scope,
        });
      }
      request.principal = principal;
    };
  };
}
