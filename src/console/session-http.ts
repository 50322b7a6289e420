/**
 * The console session as an HTTP credential: an httpOnly, SameSite=Strict cookie (Secure, and named with the
 * `__Host-` prefix, when the public URL is https; see sessionCookieSpec), accepted by every /api operation with an
 * owner's scopes. A request that changes state with it must
 * come from the console's own origin and carry the session's CSRF token in `X-CSRF-Token` (synchronizer token,
 * derived from the session secret), so a cross-site page can neither ride the cookie nor forge the token.
 */
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { AppError } from '../domain/errors.js';
import { SCOPES } from '../domain/scopes.js';
import type { Principal } from '../http/auth.js';
import type { SessionRealm, SessionService } from '../services/sessions.js';
import type { Session } from '../domain/entities.js';

export const SESSION_COOKIE = 'coffer_session';
/** The operator console's session cookie (docs/operations.md#operator-console): the same rules, its own name. */
export const OPERATOR_COOKIE = 'coffer_operator';
export const CSRF_HEADER = 'x-csrf-token';

/** Name, path and Secure flag of a realm's session cookie for a public URL (docs/console.md#the-session-cookie). */
export interface SessionCookieSpec {
  name: string;
  path: string;
  secure: boolean;
}

/**
 * - https, public URL at the root of its origin: `__Host-coffer_session`, Path=/, Secure (no Domain): the browser
 *   then accepts the cookie only from this exact host over https, so neither a sibling subdomain nor a plain-http
 *   page can plant or overwrite it;
 * - https with a base path (`https://example.org/coffer`): the cookie is scoped to that path, which `__Host-`
 *   forbids (it requires Path=/), so it is `__Secure-coffer_session`, Path=/coffer, Secure;
 * - http (development, or TLS ended elsewhere without telling Coffer): `coffer_session`, Path=/ or the base path,
 *   without Secure (a browser would drop a Secure cookie sent over http).
 *
 * The operator's cookie follows the same rules under its own name (`__Host-coffer_operator`, …): `__Host-` needs
 * Path=/, so it is not scoped to /admin; only /admin/api reads it, and nothing under /console or /api does.
 */
export function sessionCookieSpec(config: Config, realm: SessionRealm = 'owner'): SessionCookieSpec {
  const base = realm === 'owner' ? SESSION_COOKIE : OPERATOR_COOKIE;
  const url = new URL(config.publicUrl);
  const path = url.pathname.replace(/\/+$/, '') || '/';
  if (url.protocol !== 'https:') return { name: base, path, secure: false };
  return { name: path === '/' ? `__Host-${base}` : `__Secure-${base}`, path, secure: true };
}

/** The OpenAPI security scheme of the session (the third, after the two API-key headers). */
export const sessionSecurityScheme = (config: Config) => ({
  type: 'apiKey' as const,
  in: 'cookie' as const,
  name: sessionCookieSpec(config).name,
  description:
    'Console browser session (sign in at /console with a one-time link from `coffer admin login-link` or an all-scope API key ' +
    'that is not append-only). ' +
    'Holds all three scopes. Requests that change state must also send the X-CSRF-Token header the console receives at sign-in.',
});

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The value of cookie `name` in a Cookie header (the first one, as browsers send the most specific first). */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    if (part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

function cookie(config: Config, value: string, maxAgeSeconds: number, realm: SessionRealm): string {
  const spec = sessionCookieSpec(config, realm);
  const attributes = [`${spec.name}=${value}`, `Path=${spec.path}`, `Max-Age=${maxAgeSeconds}`, 'HttpOnly', 'SameSite=Strict'];
  if (spec.secure) attributes.push('Secure');
  return attributes.join('; ');
}

export function sessionCookie(config: Config, secret: string, maxAgeMs: number, realm: SessionRealm = 'owner'): string {
  return cookie(config, secret, Math.floor(maxAgeMs / 1000), realm);
}

export function clearedSessionCookie(config: Config, realm: SessionRealm = 'owner'): string {
  return cookie(config, '', 0, realm);
}

/**
 * The onRequest guard of a realm's sign-in: every attempt counts (well-formed or not, accepted or not), per client
 * address, in the database, so N nodes allow the same number of attempts as one. Each realm has its own count.
 */
export function signInLimit(sessions: Pick<SessionService, 'signInAttempt'>, realm: SessionRealm) {
  return async (request: FastifyRequest): Promise<void> => {
    const verdict = await sessions.signInAttempt(request.ip, realm);
    if (verdict.allowed) return;
    const wait = verdict.resetSeconds;
    throw new AppError(
      'too_many_sign_in_attempts',
      `Too many sign-in attempts from this address. Try again in ${wait < 120 ? `${wait} seconds` : `${Math.ceil(wait / 60)} minutes`}.`,
      { retryAfterSeconds: wait },
      { 'retry-after': String(wait) },
    );
  };
}

/**
 * Whether the request comes from a page of this server. Browsers send `Origin` on every cross-origin request and
 * on same-origin ones that change state, and `Sec-Fetch-Site` on all; absent headers (non-browser clients, which
 * hold no cookie they did not choose to send) count as same-origin.
 */
export function fromOwnOrigin(request: FastifyRequest, config: Config): boolean {
  const site = request.headers['sec-fetch-site'];
  if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') return false;
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  if (origin === new URL(config.publicUrl).origin) return true;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

export interface SessionContext {
  session: Session;
  secret: string;
}

/** The session cookie's live session, or undefined (no cookie, unknown, signed out, expired). */
export async function sessionOf(request: FastifyRequest, sessions: SessionService, config: Config): Promise<SessionContext | undefined> {
  const secret = readCookie(request.headers.cookie, sessionCookieSpec(config).name);
  if (!secret) return undefined;
  const session = await sessions.authenticate(secret);
  return session && { session, secret };
}

/** Refuses a state-changing request made with the session unless it is same-origin and carries the CSRF token. */
export function checkCsrf(request: FastifyRequest, config: Config, sessions: SessionService, secret: string): void {
  if (SAFE_METHODS.has(request.method)) return;
  const header = request.headers[CSRF_HEADER];
  if (!fromOwnOrigin(request, config) || !sessions.checkCsrf(secret, typeof header === 'string' ? header : undefined)) {
    throw new AppError(
      'csrf_token_invalid',
      'This request uses the console session but does not come from the console (missing or wrong X-CSRF-Token).',
    );
  }
}

export function sessionPrincipal(session: Session): Principal {
  return {
    accountId: session.accountId,
    keyId: session.keyId ?? `session:${session.id}`,
    scopes: SCOPES,
    appendOnly: false,
    sessionId: session.id,
  };
}

/** The third credential of the API (after the two API-key headers): the console session, with an owner's scopes. */
export function sessionCredential(sessions: SessionService, config: Config) {
  return async function fromSession(request: FastifyRequest): Promise<Principal | undefined> {
    const context = await sessionOf(request, sessions, config);
    if (!context) return undefined;
    checkCsrf(request, config, sessions, context.secret);
    return sessionPrincipal(context.session);
  };
}
