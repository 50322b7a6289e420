/**
 * The operator console (docs/operations.md#operator-console): the page at /admin and its API at /admin/api/*.
 *
 * Its own credential: the `coffer_operator` cookie (httpOnly, SameSite=Strict; on an https public URL Secure and named
 * `__Host-`/`__Secure-coffer_operator` like the owners' cookie, see sessionCookieSpec), opened by a one-time link
 * from `coffer admin login-link --operator` under the owners' rules (src/services/sessions.ts,
 * realm `operator`), with its own CSRF token. The owners' cookie is never read here and the operator's is never read
 * by /console or /api, so neither session opens the other side. What these routes return is ids, plans, counts,
 * bytes and times (src/contract/admin-schemas.ts): the operator sees no file name, metadata, envelope or key material.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuditActor } from '../domain/audit.js';
import { AppError } from '../domain/errors.js';
import { iso, isoOrNull } from '../domain/time.js';
import { jsonBodies } from '../http/bodies.js';
import type { App, AppPlugin } from '../http/fastify.js';
import { VERSION } from '../lib/version.js';
import { operatorActor } from '../services/audit.js';
import type { AccountSummary } from '../services/operator.js';
import { accountSafety, lockedBackups, safetyByAccount, type AccountSafety } from '../services/usage.js';
import { csrfTokenFor } from '../services/sessions.js';
import type { Services } from '../services/services.js';
import type { OperatorSession } from '../domain/entities.js';
import {
  AccountDetail,
  AccountKeyParams,
  AccountParams,
  GraceBody,
  LabelBody,
  OperatorSessionBody,
  OperatorSignInBody,
  Overview,
  OwnerLink,
  PlanBody,
  QuotaBody,
} from '../contract/admin-schemas.js';
import { consoleFiles } from './assets.js';
import { hidden } from './context.js';
import { sendStatic } from './page-routes.js';
import {
  CSRF_HEADER,
  OPERATOR_COOKIE,
  clearedSessionCookie,
  fromOwnOrigin,
  readCookie,
  sessionCookie,
  sessionCookieSpec,
  signInLimit,
} from './session-http.js';

export { OPERATOR_COOKIE };
export const ADMIN_PATH = '/admin';

type AdminServices = Pick<Services, 'config' | 'sessions' | 'operator' | 'keys' | 'clock' | 'stores' | 'blobs'>;

declare module 'fastify' {
  interface FastifyRequest {
    operatorSession: OperatorSession;
    operatorSecret: string;
  }
}

/** An account made after the drill and lock query: nothing drilled or locked yet. */
const noSafety = (now: number): AccountSafety =>
  accountSafety(
    { lastDrillAt: null, lastDrillResult: null, lockedBackups: 0, lockedDeletedBackups: 0, lockedBytes: 0, lockedUntil: null },
    now,
    0,
  );

const row = (summary: AccountSummary, safety: AccountSafety) => ({
  accountId: summary.accountId,
  plan: summary.plan,
  createdAt: iso(summary.createdAt),
  deletionGraceDays: summary.deletionGraceDays,
  backups: summary.readyBackups,
  graceBackups: summary.graceBackups,
  uploadingBackups: summary.uploadingBackups,
  storedBytes: summary.storedBytes,
  lastReadyAt: isoOrNull(summary.lastReadyAt),
  overdue: summary.overdue,
  keys: summary.activeKeys,
  quotaBytes: summary.quotaBytes,
  quotaSource: summary.quotaSource,
  label: summary.label,
  ownerAccountId: summary.ownerAccountId,
  hostLabel: summary.hostLabel,
  fleet: summary.fleet,
  lastDrillAt: safety.lastDrillAt,
  lastDrillResult: safety.lastDrillResult,
  drillStale: safety.drillStale,
  lockedBackups: safety.lockedBackups,
  lockedDeletedBackups: safety.lockedDeletedBackups,
  lockedUntil: safety.lockedUntil,
});

/** Rows with each account's drill and lock facts (one query for every account, or one per account listed). */
async function rowsWithSafety({ stores, clock, config }: AdminServices, summaries: AccountSummary[], all: boolean) {
  const now = clock.now();
  const ask = (accountId?: string) => safetyByAccount(stores.usage, now, config.drillMaxAgeMs, accountId);
  const maps = all ? [await ask()] : await Promise.all(summaries.map((summary) => ask(summary.accountId)));
  const safety = new Map(maps.flatMap((map) => [...map]));
  return summaries.map((summary) => row(summary, safety.get(summary.accountId) ?? noSafety(now)));
}

type Guard = (request: FastifyRequest) => Promise<void>;
type ActorOf = (request: FastifyRequest) => AuditActor;

export const adminRoutes: AppPlugin<AdminServices> = async (app, services) => {
  jsonBodies(app);

  app.addHook('onSend', async (request, reply) => {
    if (request.url.startsWith(`${ADMIN_PATH}/api/`)) reply.header('cache-control', 'no-store');
  });

  // Set by requireOperator; declared up front so every request has the same shape (Fastify's decorateRequest).
  app.decorateRequest('operatorSession');
  app.decorateRequest('operatorSecret');
  const requireOperator = operatorGuard(services);
  const actorOf: ActorOf = (request) => operatorActor(request.operatorSession.operator ?? undefined);

  adminSessionRoutes(app, services, requireOperator);
  adminReadRoutes(app, services, requireOperator);
  adminAccountSettings(app, services, requireOperator, actorOf);
  adminAccountActions(app, services, requireOperator, actorOf);
  adminPage(app);
};

/** onRequest step of /admin/api/*: the operator's session (its cookie), and for a change its CSRF token. */
function operatorGuard({ config, sessions }: AdminServices): Guard {
  const cookieName = sessionCookieSpec(config, 'operator').name;
  return async (request: FastifyRequest) => {
    const secret = readCookie(request.headers.cookie, cookieName);
    const session = secret ? await sessions.authenticateOperator(secret) : undefined;
    if (!secret || !session) {
      throw new AppError('authentication_required', 'Sign in to the operator console first (coffer admin login-link --operator).');
    }
    if (!['GET', 'HEAD'].includes(request.method)) {
      const header = request.headers[CSRF_HEADER];
      if (!fromOwnOrigin(request, config) || !sessions.checkCsrf(secret, typeof header === 'string' ? header : undefined, 'operator')) {
        throw new AppError(
          'csrf_token_invalid',
          'This request uses the operator session but does not come from the operator console (missing or wrong X-CSRF-Token).',
        );
      }
    }
    request.operatorSession = session;
    request.operatorSecret = secret;
  };
}

const sessionBody = (session: OperatorSession, secret: string) => ({
  operator: session.operator,
  createdAt: iso(session.createdAt),
  expiresAt: iso(session.expiresAt),
  csrfToken: csrfTokenFor(secret, 'operator'),
});

/** /admin/api/session: sign in with a one-time link, read the session, sign out. */
function adminSessionRoutes(app: App, { config, sessions }: AdminServices, requireOperator: Guard): void {
  // Every attempt counts, per client address, in the database (the owners' limit, a count of its own).
  const limitSignIn = signInLimit(sessions, 'operator');

  app.post(
    `${ADMIN_PATH}/api/session`,
    { schema: { ...hidden, body: OperatorSignInBody, response: { 200: OperatorSessionBody } }, onRequest: limitSignIn },
    async (request, reply) => {
      if (!fromOwnOrigin(request, config))
        throw new AppError('csrf_token_invalid', 'Sign-in requests must come from the operator console page.');
      const opened = await sessions.signInOperator(request.body.loginToken);
      if (!opened) {
        throw new AppError(
          'login_link_invalid',
          'This operator sign-in link is not valid: it was already used, has expired, or was mistyped.',
        );
      }
      reply.header('set-cookie', sessionCookie(config, opened.secret, opened.session.expiresAt - opened.session.createdAt, 'operator'));
      return sessionBody(opened.session, opened.secret);
    },
  );

  app.get(
    `${ADMIN_PATH}/api/session`,
    { schema: { ...hidden, response: { 200: OperatorSessionBody } }, onRequest: requireOperator },
    async (request) => sessionBody(request.operatorSession, request.operatorSecret),
  );

  app.delete(`${ADMIN_PATH}/api/session`, { schema: hidden, onRequest: requireOperator }, async (request, reply) => {
    await sessions.signOutOperator(request.operatorSession);
    return reply.header('set-cookie', clearedSessionCookie(config, 'operator')).code(204).send();
  });
}

/**
 * An account as the operator sees it: its row, its owner's or its hosts', its keys, its locked backups and its audit
 * trail.
 */
async function accountDetail(services: AdminServices, accountId: string) {
  const found = await services.operator.account(accountId);
  if (!found) throw new AppError('not_found', `No account ${accountId}.`);
  const [[account, ...related], locked] = await Promise.all([
    rowsWithSafety(services, [found.summary, ...(found.owner ? [found.owner] : []), ...found.hosts], false),
    lockedBackups(services.stores.usage, services.clock.now(), accountId),
  ]);
  const owner = found.owner ? related.shift()! : null;
  return {
    account: account!,
    owner,
    hosts: related,
    locked: locked.map(({ backupId, status, ciphertextSizeBytes, lockedUntil }) => ({
      backupId,
      status,
      ciphertextSizeBytes,
      lockedUntil,
    })),
    keys: found.keys.map((key) => ({
      ...key,
      createdAt: iso(key.createdAt),
      expiresAt: isoOrNull(key.expiresAt),
      revokedAt: isoOrNull(key.revokedAt),
    })),
    audit: found.audit.map((entry) => ({
      id: entry.id,
      at: iso(entry.at),
      action: entry.action,
      outcome: entry.outcome,
      actor: entry.actor,
      address: entry.address,
      target: entry.target,
      detail: entry.detail,
    })),
  };
}

/** /admin/api/overview (every account, the totals, the server) and /admin/api/accounts/{id}. */
function adminReadRoutes(app: App, services: AdminServices, requireOperator: Guard): void {
  const { operator, clock, stores, blobs, config } = services;
  app.get(`${ADMIN_PATH}/api/overview`, { schema: { ...hidden, response: { 200: Overview } }, onRequest: requireOperator }, async () => {
    const [{ accounts, totals }, migrations] = await Promise.all([operator.overview(), stores.database.appliedMigrations()]);
    const rows = await rowsWithSafety(services, accounts, true);
    const count = (test: (r: (typeof rows)[number]) => boolean) => rows.filter(test).length;
    return {
      accounts: rows,
      totals: {
        ...totals,
        drilledAccounts: count((r) => r.lastDrillAt !== null),
        staleDrillAccounts: count((r) => r.drillStale),
        failedDrillAccounts: count((r) => r.lastDrillResult === 'failed'),
      },
      server: {
        version: VERSION,
        database: stores.database.kind,
        blobStore: blobs.kind,
        migrations,
        now: iso(clock.now()),
        drillMaxAgeMs: config.drillMaxAgeMs,
      },
    };
  });

  app.get(
    `${ADMIN_PATH}/api/accounts/:id`,
    { schema: { ...hidden, params: AccountParams, response: { 200: AccountDetail } }, onRequest: requireOperator },
    async (request) => accountDetail(services, request.params.id),
  );
}

/** An account's plan, deletion grace, quota and label (each answers with the account's detail). */
function adminAccountSettings(app: App, services: AdminServices, requireOperator: Guard, actorOf: ActorOf): void {
  const { operator } = services;
  const detail = (accountId: string) => accountDetail(services, accountId);

  app.put(
    `${ADMIN_PATH}/api/accounts/:id/plan`,
    { schema: { ...hidden, params: AccountParams, body: PlanBody, response: { 200: AccountDetail } }, onRequest: requireOperator },
    async (request) => {
      if (!(await operator.setPlan(request.params.id, request.body.plan, actorOf(request)))) {
        throw new AppError('not_found', `No account ${request.params.id}.`);
      }
      return detail(request.params.id);
    },
  );

  app.put(
    `${ADMIN_PATH}/api/accounts/:id/deletion-grace`,
    { schema: { ...hidden, params: AccountParams, body: GraceBody, response: { 200: AccountDetail } }, onRequest: requireOperator },
    async (request) => {
      if (!(await operator.setDeletionGrace(request.params.id, request.body.days, actorOf(request)))) {
        throw new AppError('not_found', `No account ${request.params.id}.`);
      }
      return detail(request.params.id);
    },
  );

  app.put(
    `${ADMIN_PATH}/api/accounts/:id/quota`,
    { schema: { ...hidden, params: AccountParams, body: QuotaBody, response: { 200: AccountDetail } }, onRequest: requireOperator },
    async (request) => {
      const { quota } = request.body;
      if (!(await operator.setQuota(request.params.id, quota === 'plan' ? undefined : quota, actorOf(request)))) {
        throw new AppError('not_found', `No account ${request.params.id}.`);
      }
      return detail(request.params.id);
    },
  );

  app.put(
    `${ADMIN_PATH}/api/accounts/:id/label`,
    { schema: { ...hidden, params: AccountParams, body: LabelBody, response: { 200: AccountDetail } }, onRequest: requireOperator },
    async (request) => {
      const label = request.body.label === null ? null : request.body.label.trim() || null;
      let changed;
      try {
        changed = await operator.setLabel(request.params.id, label, actorOf(request));
      } catch (error) {
        if (error instanceof RangeError) {
          throw AppError.validation([{ path: '/label', message: error.message }], `The label was not changed: ${error.message}.`);
        }
        throw error;
      }
      if (!changed) throw new AppError('not_found', `No account ${request.params.id}.`);
      return detail(request.params.id);
    },
  );
}

/** Revoking an account's key and issuing its owner a sign-in link. */
function adminAccountActions(app: App, services: AdminServices, requireOperator: Guard, actorOf: ActorOf): void {
  const { config, operator, keys } = services;
  app.post(
    `${ADMIN_PATH}/api/accounts/:id/keys/:keyId/revoke`,
    { schema: { ...hidden, params: AccountKeyParams, response: { 200: AccountDetail } }, onRequest: requireOperator },
    async (request) => {
      const outcome = await keys.revoke(request.params.keyId, request.params.id, { actor: actorOf(request), address: null });
      if (!outcome) throw new AppError('not_found', `No key ${request.params.keyId} on account ${request.params.id}.`);
      return accountDetail(services, request.params.id);
    },
  );

  app.post(
    `${ADMIN_PATH}/api/accounts/:id/login-link`,
    { schema: { ...hidden, params: AccountParams, response: { 200: OwnerLink } }, onRequest: requireOperator },
    async (request) => {
      const issued = await operator.ownerLoginLink(request.params.id, actorOf(request));
      if (!issued) throw new AppError('not_found', `No account ${request.params.id}.`);
      return {
        accountId: request.params.id,
        url: `${config.publicUrl}/console/login#token=${issued.token}`,
        expiresAt: iso(issued.link.expiresAt),
      };
    },
  );
}

/** The page: the second entry of the console's build (console/admin.html), its assets under /console/assets. */
function adminPage(app: App): void {
  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    const rest = (request.params as { '*'?: string })['*'] ?? '';
    if (rest.startsWith('api/')) throw new AppError('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`);
    const file = consoleFiles().get('/admin.html');
    if (!file) throw new AppError('not_found', 'The operator console has not been built on this server (npm run build).');
    return sendStatic(request, reply, file);
  };
  app.get(ADMIN_PATH, { schema: hidden }, page);
  app.get(`${ADMIN_PATH}/*`, { schema: hidden }, page);
}
