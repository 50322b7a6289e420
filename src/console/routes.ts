/**
 * The Coffer console: a zero-knowledge web page for account owners, served by Coffer itself under /console.
 *
 * - /console, /console/*: the page (built by Vite into dist/console-ui; client-side routes fall back to index.html).
 * - /console/api/*: what the page needs beyond SPEC.md (sign-in, sign-out, overview, key management). Kept outside
 *   /api so the API surface stays exactly SPEC.md's. Only the session cookie is accepted here.
 * - /downloads/coffer-cli.tgz: the CLI package (`npm pack` output), so `npm install -g <that URL>` works against
 *   any Coffer server.
 *
 * The page talks to /api with the same session (the third credential of src/http/auth.ts). It downloads
 * ciphertext and decrypts it in the browser; passphrases and plaintext never reach the server.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../http/fastify.js';
import type { Config } from '../config.js';
import type { Clock } from '../domain/clock.js';
import { IN_FLIGHT_STATUSES } from '../domain/backups.js';
import { AppError } from '../domain/errors.js';
import { FixedWindowLimiter } from '../http/rate-limit.js';
import { jsonBodies } from '../http/bodies.js';
import { PLAN_RULES } from '../domain/plans.js';
import { SCOPES, type Scope } from '../domain/scopes.js';
import type { BackupService } from '../services/backups.js';
import { csrfTokenFor, type OpenedSession, type SessionService } from '../services/sessions.js';
import type { ApiKey, Session, Store } from '../store/store.js';
import { type CliTarball, type StaticFile, cliTarball, loadConsoleFiles, packageRoot } from './assets.js';
import { checkCsrf, clearedSessionCookie, fromOwnOrigin, sessionCookie, sessionOf } from './session-http.js';

export interface ConsoleOptions {
  config: Config;
  store: Store;
  sessions: SessionService;
  backups: BackupService;
  clock: Clock;
  /** Where dist/console-ui and dist/downloads are (default: this package). */
  root?: string;
}

/**
 * The page's policy: only its own scripts, styles and connections; WebAssembly (libsodium) may compile, nothing
 * may be evaluated from strings, framed, or posted elsewhere.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "worker-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString());

declare module 'fastify' {
  interface FastifyRequest {
    consoleSession: Session;
    consoleSecret: string;
  }
}

const SignInBody = Type.Object(
  {
    loginToken: Type.Optional(Type.String({ maxLength: 200 })),
    apiKey: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

const CreateKeyBody = Type.Object(
  {
    scopes: Type.Array(Type.Unsafe<Scope>({ type: 'string', enum: [...SCOPES] }), { minItems: 1, maxItems: 3, uniqueItems: true }),
    expiresInDays: Type.Union([Type.Integer({ minimum: 1, maximum: 3650 }), Type.Null()]),
  },
  { additionalProperties: false },
);

const KeyParams = Type.Object({ id: Type.String({ maxLength: 64 }) });

function keyView(key: ApiKey, now: number, session: Session) {
  const status = key.revokedAt !== null ? 'revoked' : key.expiresAt !== null && key.expiresAt <= now ? 'expired' : 'active';
  return {
    keyId: key.id,
    scopes: key.scopes,
    createdAt: iso(key.createdAt),
    expiresAt: iso(key.expiresAt),
    revokedAt: iso(key.revokedAt),
    status,
    /** The key this session was opened with: revoking it signs the page out. */
    usedByThisSession: session.keyId === key.id,
  };
}

function aboutBody(config: Config, version: string, tarball: CliTarball | undefined) {
  return {
    name: 'Coffer',
    version,
    publicUrl: config.publicUrl,
    cli: tarball
      ? {
          url: `${config.publicUrl}/downloads/coffer-cli.tgz`,
          install: `npm install -g ${config.publicUrl}/downloads/coffer-cli.tgz`,
          bytes: tarball.bytes,
          sha256: tarball.sha256,
          integrity: tarball.integrity,
        }
      : null,
  };
}

function sendStatic(request: FastifyRequest, reply: FastifyReply, file: StaticFile) {
  reply
    .header('content-type', file.type)
    .header('etag', file.etag)
    .header('cache-control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
    .header('content-security-policy', CONSOLE_CSP)
    .header('cross-origin-opener-policy', 'same-origin');
  if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
  return reply.code(200).send(file.body);
}

export async function consoleRoutes(app: App, options: ConsoleOptions): Promise<void> {
  const { config, store, sessions, backups, clock } = options;
  const root = options.root ?? packageRoot();
  const files = loadConsoleFiles(root);
  const version = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;

  jsonBodies(app);

  // Console API answers are private and never cached.
  app.addHook('onSend', async (request, reply) => {
    if (request.url.startsWith('/console/api/')) reply.header('cache-control', 'no-store');
  });

  /** onRequest guard: a live session (cookie only), and the CSRF token on state-changing requests. */
  const requireSession = async (request: FastifyRequest) => {
    const context = await sessionOf(request, sessions);
    if (!context) throw new AppError('authentication_required', 'Sign in to the console first.');
    checkCsrf(request, config, sessions, context.secret);
    request.consoleSession = context.session;
    request.consoleSecret = context.secret;
  };

  const sessionBody = (opened: Pick<OpenedSession, 'session' | 'csrfToken'> & { plan: string }) => ({
    accountId: opened.session.accountId,
    plan: opened.plan,
    signedInWith: opened.session.keyId === null ? 'login-link' : 'api-key',
    keyId: opened.session.keyId,
    createdAt: iso(opened.session.createdAt),
    expiresAt: iso(opened.session.expiresAt),
    csrfToken: opened.csrfToken,
  });

  const hidden = { hide: true };

  // ---- sign in, session, sign out ----

  // Every sign-in attempt counts (well-formed or not, accepted or not), per client address.
  const signInLimiter = new FixedWindowLimiter(
    { max: config.signInLimit.maxAttempts, windowMs: config.signInLimit.windowMs },
    () => clock.now(),
  );
  const limitSignIn = async (request: FastifyRequest) => {
    const verdict = signInLimiter.hit(request.ip);
    if (verdict.allowed) return;
    const wait = verdict.resetSeconds;
    throw new AppError(
      'too_many_sign_in_attempts',
      `Too many sign-in attempts from this address. Try again in ${wait < 120 ? `${wait} seconds` : `${Math.ceil(wait / 60)} minutes`}.`,
      { retryAfterSeconds: wait },
      { 'retry-after': String(wait) },
    );
  };

  app.post<{ Body: Static<typeof SignInBody> | undefined }>(
    '/console/api/session',
    { schema: { ...hidden, body: Type.Optional(SignInBody) }, onRequest: limitSignIn },
    async (request, reply) => {
      // Login CSRF: only the console page itself may open a session in this browser.
      if (!fromOwnOrigin(request, config)) {
        throw new AppError('csrf_token_invalid', 'Sign-in requests must come from the console page.');
      }
      const body = request.body ?? {};
      if ((body.loginToken === undefined) === (body.apiKey === undefined)) {
        throw AppError.validation([{ path: '(body)', message: 'send exactly one of loginToken and apiKey' }]);
      }
      let opened: OpenedSession | undefined;
      if (body.loginToken !== undefined) {
        opened = await sessions.signInWithLink(body.loginToken);
        if (!opened) {
          throw new AppError('login_link_invalid', 'This sign-in link is not valid: it was already used, has expired, or was mistyped.');
        }
      } else {
        const outcome = await sessions.signInWithKey(body.apiKey!);
        if (!outcome.ok && outcome.reason === 'insufficient_scope') {
          throw new AppError(
            'insufficient_scope',
            `The console needs a key that holds all three permissions; this one lacks ${outcome.missing}.`,
            { requiredPermission: outcome.missing },
          );
        }
        if (!outcome.ok) throw new AppError('authentication_required', 'This API key is unknown, revoked or expired.');
        opened = outcome.opened;
      }
      reply.header('set-cookie', sessionCookie(config, opened.secret, opened.session.expiresAt - opened.session.createdAt));
      return sessionBody({ ...opened, plan: opened.account.plan });
    },
  );

  app.get('/console/api/session', { schema: hidden, onRequest: requireSession }, async (request) => {
    const session = request.consoleSession;
    const account = await store.getAccount(session.accountId);
    return sessionBody({ session, csrfToken: csrfTokenFor(request.consoleSecret), plan: account?.plan ?? 'free' });
  });

  app.delete('/console/api/session', { schema: hidden, onRequest: requireSession }, async (request, reply) => {
    await sessions.signOut(request.consoleSession);
    reply.header('set-cookie', clearedSessionCookie(config)).code(204);
    return reply.send();
  });

  // ---- overview: plan, cadence, vault ----

  app.get('/console/api/overview', { schema: hidden, onRequest: requireSession }, async (request) => {
    const { accountId } = request.consoleSession;
    const now = clock.now();
    const { account, vault } = await backups.accountView(accountId);
    const rules = PLAN_RULES[account.plan];
    const visible = await backups.list(accountId);
    const inFlight = visible.find((b) => IN_FLIGHT_STATUSES.includes(b.status) && b.expiresAt > now);
    const nextAllowedAt = account.lastReadyCreatedAt === null ? null : account.lastReadyCreatedAt + rules.intervalMs;
    const newest = visible[0];
    return {
      accountId,
      plan: account.plan,
      backupInterval: rules.interval,
      intervalWords: rules.intervalWords,
      retentionDays: Math.round(rules.retentionMs / 86_400_000),
      backups: {
        count: visible.length,
        ready: visible.filter((b) => b.status === 'READY').length,
        newestCreatedAt: iso(newest?.createdAt),
        storedCiphertextBytes: visible.reduce((sum, b) => sum + (b.status === 'READY' ? (b.ciphertextSizeBytes ?? 0) : 0), 0),
      },
      cadence: {
        lastReadyBackupCreatedAt: iso(account.lastReadyCreatedAt),
        nextAllowedAt: nextAllowedAt !== null && nextAllowedAt > now ? iso(nextAllowedAt) : null,
        inFlightBackupId: inFlight?.id ?? null,
      },
      vault: vault
        ? {
            initialized: true,
            cryptoVersion: vault.cryptoVersion,
            kdf: { algorithm: 'Argon2id13', opslimit: vault.kdf.opslimit, memlimit: vault.kdf.memlimit, saltBytes: Buffer.from(vault.kdf.salt, 'base64').length },
            createdAt: iso(vault.createdAt),
            updatedAt: iso(vault.updatedAt),
            lastRotatedAt: vault.createdAt !== undefined && vault.updatedAt > vault.createdAt ? iso(vault.updatedAt) : null,
          }
        : { initialized: false, cryptoVersion: null, kdf: null, createdAt: null, updatedAt: null, lastRotatedAt: null },
    };
  });

  // ---- API keys ----

  app.get('/console/api/keys', { schema: hidden, onRequest: requireSession }, async (request) => {
    const session = request.consoleSession;
    const now = clock.now();
    const list = await store.listApiKeys(session.accountId);
    return { keys: list.reverse().map((key) => keyView(key, now, session)) };
  });

  app.post<{ Body: Static<typeof CreateKeyBody> }>(
    '/console/api/keys',
    { schema: { ...hidden, body: CreateKeyBody }, onRequest: requireSession },
    async (request, reply) => {
      const session = request.consoleSession;
      const scopes = SCOPES.filter((scope) => request.body.scopes.includes(scope));
      const { expiresInDays } = request.body;
      const minted = await sessions.mintKey(session, { scopes, expiresInMs: expiresInDays === null ? null : expiresInDays * 86_400_000 });
      reply.code(201);
      return { ...keyView(minted.key, clock.now(), session), apiKey: minted.apiKey, expiryCapped: minted.capped };
    },
  );

  app.delete<{ Params: Static<typeof KeyParams> }>(
    '/console/api/keys/:id',
    { schema: { ...hidden, params: KeyParams }, onRequest: requireSession },
    async (request) => {
      const session = request.consoleSession;
      const key = await store.getApiKey(request.params.id);
      if (!key || key.accountId !== session.accountId) throw new AppError('not_found', 'No such API key in this account.');
      const at = clock.now();
      await store.revokeApiKey(key.id, at);
      const revoked = (await store.getApiKey(key.id)) ?? key;
      return keyView(revoked, at, session);
    },
  );

  // ---- public: what this server is, and its CLI ----

  app.get('/console/api/about', { schema: hidden }, async () => aboutBody(config, version, cliTarball(root)));

  app.get('/downloads/coffer-cli.tgz', { schema: hidden }, async (_request, reply) => {
    const tarball = cliTarball(root);
    if (!tarball) throw new AppError('not_found', 'The CLI package has not been built on this server (npm run build).');
    return reply
      .header('content-type', 'application/gzip')
      .header('content-length', tarball.bytes)
      .header('content-disposition', `attachment; filename="coffer-cli-${version}.tgz"`)
      .header('etag', `"${tarball.sha256}"`)
      .header('cache-control', 'no-cache')
      .header('access-control-allow-origin', '*')
      .send(fs.createReadStream(tarball.file));
  });

  // ---- the page ----

  const index = files.get('/index.html');
  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    const rest = (request.params as { '*'?: string })['*'] ?? '';
    const file = rest === '' ? undefined : files.get(`/${rest}`);
    if (file) return sendStatic(request, reply, file);
    if (rest.startsWith('api/') || rest.startsWith('assets/')) {
      throw new AppError('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`);
    }
    if (!index) throw new AppError('not_found', 'The console has not been built on this server (npm run build).');
    return sendStatic(request, reply, index);
  };
  app.get('/console', { schema: hidden }, page);
  app.get('/console/*', { schema: hidden }, page);
}
