/**
 * Credentials (docs/api-rules.md#scopes): Bearer or x-api-key, or else the console's browser session (the 401
 * hint names it; src/console/session-http.ts) with an owner's scopes; scopes checked before any id is looked at.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestAsyncHookHandler } from 'fastify';
import { AppError } from '../domain/errors.js';
import type { Scope } from '../domain/scopes.js';
import type { KeyService } from '../services/keys.js';
import type { ApiKey } from '../domain/entities.js';
import { NOT_CACHED } from '../store/ports/keys.js';

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
  let found: string | undefined;
  const raw = request.raw.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    // Only names of the right length are lower-cased and compared (most header lines are neither).
    const length = raw[i]!.length;
    if (length !== AUTHORIZATION.length && length !== X_API_KEY.length) continue;
    const name = raw[i]!.toLowerCase();
    let candidate: string | undefined;
    if (name === AUTHORIZATION) {
      const match = BEARER.exec(raw[i + 1]!.trim());
      if (match) candidate = match[1]!;
    } else if (name === X_API_KEY) {
      const value = raw[i + 1]!.trim();
      if (value !== '') candidate = value;
    }
    if (candidate === undefined) continue;
    if (found === undefined) found = candidate;
    else if (candidate !== found) return null;
  }
  return found;
}

const AUTHORIZATION = 'authorization';
const X_API_KEY = 'x-api-key';
const BEARER = /^Bearer\s+(\S+)$/i;

/** A credential other than an API key: its principal, undefined when the request carries none; throws to refuse. */
export type SessionCredential = (request: FastifyRequest) => Promise<Principal | undefined>;

export function authenticator(keys: KeyService, session?: SessionCredential) {
  /** The caller behind the request's credential, undefined when it presents none that is valid. */
  async function principalOf(request: FastifyRequest, secret: string | null | undefined): Promise<Principal | undefined> {
    if (secret) {
      const key = await keys.authenticate(secret);
      return key && principalOfKey(key);
    }
    // No API key header at all: the browser session is the third credential.
    if (secret === undefined && session) return session(request);
    return undefined;
  }

  return function requireScope(scope: Scope): onRequestAsyncHookHandler {
    const admit = (request: FastifyRequest, principal: Principal | undefined): void => {
      if (!principal) throw unauthenticated();
      if (!principal.scopes.includes(scope)) {
        throw new AppError('insufficient_scope', `This API key lacks the ${scope} permission.`, {
          requiredPermission: scope,
        });
      }
      request.principal = principal;
    };
    const admitLater = async (request: FastifyRequest, secret: string | null | undefined): Promise<void> =>
      admit(request, await principalOf(request, secret));
    /**
     * As a Fastify hook (called with `done`): synchronous when the metadata cache knows the key, so a request with a
     * known key waits for no promise (bench P3); otherwise, and when a route calls it itself, a promise.
     */
    function authenticate(request: FastifyRequest, _reply: FastifyReply, done?: HookHandlerDoneFunction): Promise<void> | undefined {
      const secret = presentedKey(request);
      if (done === undefined) return admitLater(request, secret);
      if (secret) {
        const key = keys.authenticateCached(secret);
        if (key !== NOT_CACHED) {
          admit(request, key && principalOfKey(key));
          done();
          return undefined;
        }
      }
      admitLater(request, secret).then(() => done(), done);
      return undefined;
    }
    return authenticate as onRequestAsyncHookHandler;
  };
}

function principalOfKey(key: ApiKey): Principal {
  return { accountId: key.accountId, keyId: key.id, scopes: key.scopes, appendOnly: key.appendOnly };
}
