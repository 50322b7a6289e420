/**
 * Console sign-in without stored passwords: one-time login links (`coffer admin login-link`) and all-scope API
 * keys open browser sessions. Link tokens and session secrets are random 256-bit values; only their SHA-256
 * hashes are stored. The CSRF token of a session is derived from its secret (HMAC), so it needs no storage,
 * changes with every session, and cannot be computed by anyone who cannot read the httpOnly cookie.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import type { Clock } from '../domain/clock.js';
import { keyStatus } from '../domain/keys.js';
import { sameSecret } from '../lib/compare.js';
import { SCOPES, type Scope } from '../domain/scopes.js';
import type { Account, ApiKey, LoginLink, OperatorLink, OperatorSession, Session } from '../domain/entities.js';
import type { Stores } from '../store/ports/stores.js';
import type { KeyService } from './keys.js';

export const LOGIN_TOKEN_PATTERN = /^cfl_[A-Za-z0-9_-]{43}$/;
export const SESSION_SECRET_PATTERN = /^cfs_[A-Za-z0-9_-]{43}$/;

/** A login link is valid for this long unless the operator asks for less (or more, up to the maximum). */
export const LOGIN_LINK_TTL_MS = 15 * 60_000;
export const LOGIN_LINK_MAX_TTL_MS = 24 * 3_600_000;
/**
 * A session ends this long after sign-in, or when the key it was opened with expires if that is sooner; sign-out
 * and revocation of that key end it at once.
 */
export const SESSION_TTL_MS = 12 * 3_600_000;

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');
const token = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;

/**
 * Who a session is for: an account's owner (/console) or the operator (/admin, docs/operations.md#operator-console).
 * Both follow the rules of this file; they live in separate tables, so a token of one realm is unknown to the other.
 */
export type SessionRealm = 'owner' | 'operator';

/** The CSRF token that belongs to a session secret (a different one per realm). */
export function csrfTokenFor(sessionSecret: string, realm: SessionRealm = 'owner'): string {
  return createHmac('sha256', sessionSecret)
    .update(realm === 'owner' ? 'coffer/v1/csrf' : 'coffer/v1/operator-csrf')
    .digest('base64url');
}

function checkLinkLifetime(ttlMs: number): void {
  if (!(ttlMs > 0 && ttlMs <= LOGIN_LINK_MAX_TTL_MS)) throw new RangeError('login link lifetime out of range');
}

/** A session that has not ended at `now`. */
const live = (session: { revokedAt: number | null; expiresAt: number }, now: number) =>
  session.revokedAt === null && session.expiresAt > now;

export interface IssuedLoginLink {
  link: LoginLink;
  /** The secret part of the link, shown once. */
  token: string;
}

export interface OpenedSession {
  session: Session;
  account: Account;
  /** The cookie value (shown to the browser only). */
  secret: string;
  csrfToken: string;
}

export interface IssuedOperatorLink {
  link: OperatorLink;
  token: string;
}

export interface OpenedOperatorSession {
  session: OperatorSession;
  secret: string;
  csrfToken: string;
}

export type KeySignIn =
  | { ok: true; opened: OpenedSession }
  | { ok: false; reason: 'unknown_key' }
  | { ok: false; reason: 'insufficient_scope'; missing: Scope }
  /** The console manages the account (keys, the audit trail): an append-only key may not open it. */
  | { ok: false; reason: 'append_only' };

/** Console sign-in attempts allowed per client address and fixed window (COFFER_SIGNIN_ATTEMPTS, _WINDOW). */
export interface SignInLimit {
  maxAttempts: number;
  windowMs: number;
}

const DEFAULT_SIGN_IN_LIMIT: SignInLimit = { maxAttempts: 30, windowMs: 600_000 };

export class SessionService {
  constructor(
    private readonly ports: Pick<Stores, 'accounts' | 'keys' | 'sessions' | 'operatorSessions' | 'signIns'>,
    private readonly keys: KeyService,
    private readonly clock: Clock,
    private readonly signInLimit: SignInLimit = DEFAULT_SIGN_IN_LIMIT,
  ) {}

  /**
   * Counts a sign-in attempt from `address` in the database, so every node counts against one limit; whether it
   * is within the limit, and the whole seconds until the window ends. Each realm counts on its own (the operator's
   * rows are keyed `operator <address>`; an address has no space).
   */
  async signInAttempt(address: string, realm: SessionRealm = 'owner'): Promise<{ allowed: boolean; resetSeconds: number }> {
    const now = this.clock.now();
    const key = realm === 'owner' ? address : `${realm} ${address}`;
    const { count, windowStart } = await this.ports.signIns.countSignInAttempt(key, now, this.signInLimit.windowMs);
    return {
      allowed: count <= this.signInLimit.maxAttempts,
      resetSeconds: Math.max(1, Math.ceil((windowStart + this.signInLimit.windowMs - now) / 1000)),
    };
  }

  /** A new one-time link for `accountId`; undefined when there is no such account. */
  async createLoginLink(accountId: string, ttlMs = LOGIN_LINK_TTL_MS): Promise<IssuedLoginLink | undefined> {
    checkLinkLifetime(ttlMs);
    if (!(await this.ports.accounts.getAccount(accountId))) return undefined;
    const now = this.clock.now();
    const link: LoginLink = { id: uuidv7(), accountId, createdAt: now, expiresAt: now + ttlMs, usedAt: null };
    const secret = token('cfl_');
    await this.ports.sessions.createLoginLink(link, sha256(secret));
    return { link, token: secret };
  }

  /** Opens a session with a login link token; undefined when it is malformed, unknown, used or expired. */
  async signInWithLink(loginToken: string): Promise<OpenedSession | undefined> {
    if (!LOGIN_TOKEN_PATTERN.test(loginToken)) return undefined;
    const link = await this.ports.sessions.consumeLoginLink(sha256(loginToken), this.clock.now());
    if (!link) return undefined;
    return this.open(link.accountId, null);
  }

  /** Opens a session with an API key that holds every scope and is not append-only (an owner's key). */
  async signInWithKey(apiKey: string): Promise<KeySignIn> {
    const key = await this.keys.authenticate(apiKey);
    if (!key) return { ok: false, reason: 'unknown_key' };
    const missing = SCOPES.find((scope) => !key.scopes.includes(scope));
    if (missing) return { ok: false, reason: 'insufficient_scope', missing };
    if (key.appendOnly) return { ok: false, reason: 'append_only' };
    const opened = await this.open(key.accountId, key);
    return opened ? { ok: true, opened } : { ok: false, reason: 'unknown_key' };
  }

  private async open(accountId: string, key: ApiKey | null): Promise<OpenedSession | undefined> {
    const account = await this.ports.accounts.getAccount(accountId);
    if (!account) return undefined;
    const now = this.clock.now();
    const session: Session = {
      id: uuidv7(),
      accountId,
      keyId: key?.id ?? null,
      createdAt: now,
      expiresAt: Math.min(now + SESSION_TTL_MS, key?.expiresAt ?? Infinity),
      revokedAt: null,
      // A key made in a console session signs in no more freshly than that session did.
      freshAt: Math.min(now, key?.mintedFreshAt ?? now),
    };
    const secret = token('cfs_');
    await this.ports.sessions.createSession(session, sha256(secret));
    return { session, account, secret, csrfToken: csrfTokenFor(secret) };
  }

  /** The live session behind a cookie secret: known, not signed out, not expired, and its key (if any) still valid. */
  async authenticate(secret: string): Promise<Session | undefined> {
    if (!SESSION_SECRET_PATTERN.test(secret)) return undefined;
    const session = await this.ports.sessions.findSessionByHash(sha256(secret));
    const now = this.clock.now();
    if (!session || !live(session, now)) return undefined;
    if (session.keyId !== null) {
      const key = await this.ports.keys.getApiKey(session.keyId);
      if (!key || keyStatus(key, now) !== 'active') return undefined;
    }
    return session;
  }

  /** The account a live session belongs to (undefined if it no longer exists). */
  account(session: Session): Promise<Account | undefined> {
    return this.ports.accounts.getAccount(session.accountId);
  }

  /**
   * Deletes login links and sessions that have ended (expired, used, signed out, or their key revoked), and sign-in
   * attempt windows that have ended.
   */
  async prune(): Promise<number> {
    const now = this.clock.now();
    await this.ports.signIns.pruneSignInAttempts(now - this.signInLimit.windowMs);
    return this.ports.sessions.pruneSessions(now);
  }

  /** Whether `presented` is the CSRF token of the session with `secret` (constant-time). */
  checkCsrf(secret: string, presented: string | undefined, realm: SessionRealm = 'owner'): boolean {
    if (typeof presented !== 'string') return false;
    return sameSecret(presented, csrfTokenFor(secret, realm));
  }

  // ---- the operator realm: the same tokens, lifetimes, single use and CSRF rule; no account, no key ----

  /** A new one-time link to the operator console, made by `operator` (the OS user of `coffer admin`). */
  async createOperatorLink(operator: string | null, ttlMs = LOGIN_LINK_TTL_MS): Promise<IssuedOperatorLink> {
    checkLinkLifetime(ttlMs);
    const now = this.clock.now();
    const link: OperatorLink = { id: uuidv7(), operator, createdAt: now, expiresAt: now + ttlMs, usedAt: null };
    const secret = token('cfl_');
    await this.ports.operatorSessions.createOperatorLink(link, sha256(secret));
    return { link, token: secret };
  }

  /** Opens an operator session with an operator link token; undefined when malformed, unknown, used or expired. */
  async signInOperator(loginToken: string): Promise<OpenedOperatorSession | undefined> {
    if (!LOGIN_TOKEN_PATTERN.test(loginToken)) return undefined;
    const now = this.clock.now();
    const link = await this.ports.operatorSessions.consumeOperatorLink(sha256(loginToken), now);
    if (!link) return undefined;
    const session: OperatorSession = {
      id: uuidv7(),
      operator: link.operator,
      createdAt: now,
      expiresAt: now + SESSION_TTL_MS,
      revokedAt: null,
    };
    const secret = token('cfs_');
    await this.ports.operatorSessions.createOperatorSession(session, sha256(secret));
    return { session, secret, csrfToken: csrfTokenFor(secret, 'operator') };
  }

  /** The live operator session behind a cookie secret. */
  async authenticateOperator(secret: string): Promise<OperatorSession | undefined> {
    if (!SESSION_SECRET_PATTERN.test(secret)) return undefined;
    const session = await this.ports.operatorSessions.findOperatorSessionByHash(sha256(secret));
    return session && live(session, this.clock.now()) ? session : undefined;
  }

  async signOutOperator(session: OperatorSession): Promise<void> {
    await this.ports.operatorSessions.revokeOperatorSession(session.id, this.clock.now());
  }

  /** Ends the session server-side: its cookie is worthless from now on, wherever it was copied. */
  async signOut(session: Session): Promise<void> {
    await this.ports.sessions.revokeSession(session.id, this.clock.now());
  }
}
