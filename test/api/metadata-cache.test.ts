/**
 * The metadata cache (src/store/cached-store.ts) never shows an old state: through HTTP on a real server, every kind
 * of write that changes what GET /api/backups, GET /api/backup-account or an API key lookup answers is seen by the
 * next read, after those reads were served from the cache (its hit counter proves it). Writes through the server
 * (API, console, sweeper, clock-driven expiry) and writes by a separate `coffer admin` process: on SQLite seen by
 * the next read (PRAGMA data_version), on PostgreSQL once the server hears it (NOTIFY from the change triggers):
 * the PostgreSQL server runs with COFFER_METADATA_CACHE_TTL=1h, so no entry is read again for its age meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { json, runCli } from '../client/helpers.js';
import { assertBuilt } from '../helpers/built.js';
import { MetadataCache } from '../../src/store/cached-store.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

interface Engine {
  name: string;
  skip: boolean;
  /** Another process's change is seen by the next read (SQLite), or only once its notification arrives. */
  adminSeenAtOnce: boolean;
  start(clock: ManualClock): Promise<{ server: TestServer; adminEnv: Record<string, string>; stop(): Promise<void> }>;
}

const engines: Engine[] = [
  {
    name: 'SQLite',
    skip: false,
    adminSeenAtOnce: true,
    async start(clock) {
      const server = await startTestServer({ clock });
      return { server, adminEnv: { COFFER_DATA_DIR: server.dataDir }, stop: () => server.stop() };
    },
  },
  {
    name: 'PostgreSQL',
    skip: skipPg,
    adminSeenAtOnce: false,
    async start(clock) {
      requirePg();
      const schema: TestSchema = await createTestSchema('coffer_cache');
      try {
        // The backstop age far beyond this file's run: a change is seen only if its notification is heard.
        const env = { COFFER_DATABASE_URL: schema.url, COFFER_METADATA_CACHE_TTL: '1h' };
        const server = await startTestServer({ clock, env });
        return {
          server,
          adminEnv: env,
          async stop() {
            await server.stop();
            await schema.drop();
          },
        };
      } catch (error) {
        await schema.drop();
        throw error;
      }
    },
  },
];

for (const engine of engines) {
  describe.skipIf(engine.skip)(`metadata cache, change visible on the next read: ${engine.name}`, () => {
    const clock = new ManualClock(Date.now());
    let server: TestServer;
    let adminEnv: Record<string, string>;
    let stop: () => Promise<void> = async () => undefined;
    let cache: MetadataCache;

    beforeAll(async () => {
      assertBuilt();
      ({ server, adminEnv, stop } = await engine.start(clock));
      expect(server.parts.cache).toBeInstanceOf(MetadataCache);
      cache = server.parts.cache as MetadataCache;
    });
    afterAll(() => stop());

    const admin = async (args: string[]) =>
      json(await runCli(['admin', ...args, '--json'], { ...adminEnv, COFFER_PUBLIC_URL: server.url }));

    /**
     * Reads `path` until a read is served from the cache (at most 5 times: on PostgreSQL the notification of the
     * server's own last write may still arrive and empty the entry once); returns that answer.
     */
    async function cachedRead(call: ReturnType<typeof api>, urlPath: string) {
      for (let attempt = 0; attempt < 5; attempt++) {
        const hits = cache.stats.hits;
        const answer = await call('GET', urlPath);
        if (cache.stats.hits > hits) return answer;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error(`GET ${urlPath} was never served from the cache`);
    }

    /**
     * What the next read says after another process's change: on SQLite the very next read; on PostgreSQL the
     * change arrives by notification, so the read is repeated (every 20 ms) until it matches, for at most 10 s (a
     * bound against hangs, far below the 1 h backstop age).
     */
    async function afterAdmin<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
      let value = await read();
      if (engine.adminSeenAtOnce) return value;
      const deadline = Date.now() + 10_000;
      while (!done(value) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        value = await read();
      }
      return value;
    }

    async function owner(plan: 'free' | 'pro' = 'pro') {
      clock.advance(31 * MIN);
      const { apiKey, accountId, keyId } = await server.newKey({ plan });
      return { apiKey, accountId, keyId, call: api(server.url, apiKey) };
    }

    /** A console session of the account, opened now with a login link (a fresh sign-in). */
    async function consoleSession(accountId: string) {
      const { token } = (await server.parts.sessions.createLoginLink(accountId))!;
      const opened = await fetch(`${server.url}/console/api/session`, {
        method: 'POST',
        headers: { origin: server.url, 'content-type': 'application/json' },
        body: JSON.stringify({ loginToken: token }),
      });
      expect(opened.status).toBe(200);
      const cookie = opened.headers.get('set-cookie')!.split(';')[0]!;
      const { csrfToken } = (await opened.json()) as { csrfToken: string };
      return async (method: string, url: string, body?: unknown) => {
        const answer = await fetch(`${server.url}${url}`, {
          method,
          headers: {
            cookie,
            origin: server.url,
            'x-csrf-token': csrfToken,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await answer.text();
        return { status: answer.status, body: text ? JSON.parse(text) : null };
      };
    }

    const statuses = (answer: { body: { backups: { id: string; status: string }[] } }) =>
      answer.body.backups.map((b) => `${b.id}:${b.status}`);

    it('backups: create, upload, finalize, delete, undelete (console and coffer admin), purge, grace and expiry', async () => {
      const { call, accountId } = await owner();
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope(1) })).status).toBe(200);
      expect((await cachedRead(call, '/api/backups')).body.backups).toEqual([]);

      const created = await call('POST', '/api/backups');
      expect(created.status).toBe(201);
      const id = created.body.backupId as string;
      expect(statuses(await call('GET', '/api/backups'))).toEqual([`${id}:PENDING_UPLOAD`]);

      const data = Buffer.alloc(1000, 7);
      const uploaded = await call('POST', `/api/backups/upload?backupId=${id}`, {
        body: data,
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(uploaded.status).toBe(201);
      expect(statuses(await cachedRead(call, '/api/backups'))).toEqual([`${id}:UPLOADED`]);

      expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
      expect(statuses(await cachedRead(call, '/api/backups'))).toEqual([`${id}:READY`]);

      // The deletion grace, set by the console, decides what the next delete does.
      const consoleCall = await consoleSession(accountId);
      expect((await consoleCall('PUT', '/console/api/deletions/grace', { days: 7 })).status).toBe(200);
      expect((await call('DELETE', `/api/backups/${id}`)).status).toBe(200);
      expect((await call('GET', '/api/backups')).body.backups).toEqual([]);
      expect((await consoleCall('POST', `/console/api/deletions/${id}/restore`)).status).toBe(200);
      expect(statuses(await cachedRead(call, '/api/backups'))).toEqual([`${id}:READY`]);

      // Deleted again, then undeleted by the operator in another process.
      expect((await call('DELETE', `/api/backups/${id}`)).status).toBe(200);
      expect((await cachedRead(call, '/api/backups')).body.backups).toEqual([]);
      expect(await admin(['backups', 'undelete', id])).toMatchObject({ backupId: id, status: 'READY' });
      const undeleted = await afterAdmin(
        () => call('GET', '/api/backups'),
        (answer) => answer.body.backups.length === 1,
      );
      expect(statuses(undeleted)).toEqual([`${id}:READY`]);

      // Purged for good from the console: gone from the list and from the scheduled deletions.
      expect((await call('DELETE', `/api/backups/${id}`)).status).toBe(200);
      expect((await consoleCall('POST', `/console/api/deletions/${id}/purge`)).status).toBe(200);
      expect((await cachedRead(call, '/api/backups')).body.backups).toEqual([]);

      // Time alone: an open upload slot whose window passes, read from the cache until then, is pruned by the
      // next list once it is due (no write came first).
      clock.advance(31 * MIN);
      const slot = (await call('POST', '/api/backups')).body.backupId as string;
      expect(statuses(await cachedRead(call, '/api/backups'))).toEqual([`${slot}:PENDING_UPLOAD`]);
      clock.advance(server.parts.config.uploadWindowMs + 1);
      expect((await call('GET', '/api/backups')).body.backups).toEqual([]);
    });

    it('a plan change by coffer admin decides the retention of the next backup (its expiresAt), though the account was cached', async () => {
      const { call, accountId } = await owner('free');
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope(1) })).status).toBe(200);
      expect((await cachedRead(call, '/api/backup-account')).body.backupInterval).toBe('1d');
      expect(await admin(['accounts', 'set-plan', accountId, 'pro'])).toEqual({ accountId, plan: 'pro' });
      await afterAdmin(
        () => call('GET', '/api/backup-account'),
        (answer) => answer.body.backupInterval === '30m',
      );
      const id = (await call('POST', '/api/backups')).body.backupId as string;
      const data = Buffer.alloc(300, 5);
      await call('POST', `/api/backups/upload?backupId=${id}`, { body: data, headers: { 'content-type': 'application/octet-stream' } });
      const finalized = await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(data.length) });
      expect(finalized.status).toBe(200);
      expect(Date.parse(finalized.body.expiresAt as string)).toBe(clock.now() + 90 * DAY);
      const listed = (await call('GET', '/api/backups')).body.backups as { id: string; expiresAt: string }[];
      expect(Date.parse(listed.find((b) => b.id === id)!.expiresAt)).toBe(clock.now() + 90 * DAY);
    });

    it('a READY backup whose retention ends leaves the next list, though the list was cached', async () => {
      const { call } = await owner('free');
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope(1) })).status).toBe(200);
      const id = (await call('POST', '/api/backups')).body.backupId as string;
      const data = Buffer.alloc(500, 3);
      await call('POST', `/api/backups/upload?backupId=${id}`, { body: data, headers: { 'content-type': 'application/octet-stream' } });
      expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
      expect(statuses(await cachedRead(call, '/api/backups'))).toEqual([`${id}:READY`]);
      clock.advance(7 * DAY + 1); // the free plan keeps a backup 7 days
      expect((await call('GET', '/api/backups')).body.backups).toEqual([]);
      expect((await call('GET', `/api/backups/${id}`)).status).toBe(404);
    });

    it('account: bootstrap, rotate, vault restore (console), reset, plan (coffer admin)', async () => {
      const { call, accountId } = await owner('free');
      expect((await cachedRead(call, '/api/backup-account')).body).toMatchObject({ initialized: false, backupInterval: '1d' });

      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope(1) })).status).toBe(200);
      const first = await cachedRead(call, '/api/backup-account');
      expect(first.body).toMatchObject({ initialized: true, wrappedMasterKey: envelope(1).wrappedMasterKey });

      // A rotate keeps the replaced envelope only with a deletion grace (set by the operator in another process).
      expect(await admin(['accounts', 'set-deletion-grace', accountId, '3'])).toEqual({ accountId, deletionGraceDays: 3 });
      const consoleCall = await consoleSession(accountId);
      const grace = await afterAdmin(
        () => consoleCall('GET', '/console/api/vault/history'),
        (answer) => answer.body.deletionGraceDays === 3,
      );
      expect(grace.body.deletionGraceDays).toBe(3);

      expect((await call('POST', '/api/backup-account/rotate', { json: envelope(2) })).status).toBe(200);
      const rotated = await cachedRead(call, '/api/backup-account');
      expect(rotated.body.wrappedMasterKey).toBe(envelope(2).wrappedMasterKey);
      expect(rotated.headers.get('etag')).not.toBe(first.headers.get('etag'));

      const history = await consoleCall('GET', '/console/api/vault/history');
      expect(history.body.entries).toHaveLength(1);
      expect((await consoleCall('POST', `/console/api/vault/history/${history.body.entries[0].id}/restore`)).status).toBe(200);
      const restored = await cachedRead(call, '/api/backup-account');
      expect(restored.body.wrappedMasterKey).toBe(envelope(1).wrappedMasterKey);
      expect(restored.headers.get('etag')).toBe(first.headers.get('etag'));

      expect((await call('POST', '/api/backup-account/reset', { json: {} })).status).toBe(200);
      expect((await cachedRead(call, '/api/backup-account')).body).toMatchObject({ initialized: false, wrappedMasterKey: null });

      expect(await admin(['accounts', 'set-plan', accountId, 'pro'])).toEqual({ accountId, plan: 'pro' });
      const pro = await afterAdmin(
        () => call('GET', '/api/backup-account'),
        (answer) => answer.body.backupInterval === '30m',
      );
      expect(pro.body.backupInterval).toBe('30m');
    });

    it('keys: revoked in the console or by coffer admin, expired by the clock: refused though they were cached', async () => {
      const { accountId, call } = await owner();
      expect((await cachedRead(call, '/api/backup-account')).status).toBe(200);
      const consoleCall = await consoleSession(accountId);

      const second = await server.newKey({ accountId });
      const secondCall = api(server.url, second.apiKey);
      expect((await cachedRead(secondCall, '/api/backup-account')).status).toBe(200);
      expect((await consoleCall('DELETE', `/console/api/keys/${second.keyId}`)).status).toBe(200);
      expect((await secondCall('GET', '/api/backup-account')).status).toBe(401);
      expect((await secondCall('GET', '/api/backups')).status).toBe(401);

      const third = await server.newKey({ accountId });
      const thirdCall = api(server.url, third.apiKey);
      expect((await cachedRead(thirdCall, '/api/backups')).status).toBe(200);
      expect(await admin(['keys', 'revoke', third.keyId])).toEqual({ keyId: third.keyId, revoked: true });
      const refused = await afterAdmin(
        () => thirdCall('GET', '/api/backups'),
        (answer) => answer.status === 401,
      );
      expect(refused.status).toBe(401);

      const brief = await server.newKey({ accountId, expiresInMs: HOUR });
      const briefCall = api(server.url, brief.apiKey);
      expect((await cachedRead(briefCall, '/api/backup-account')).status).toBe(200);
      clock.advance(HOUR - 1);
      expect((await briefCall('GET', '/api/backup-account')).status).toBe(200);
      clock.advance(1);
      expect((await briefCall('GET', '/api/backup-account')).status).toBe(401);

      // A key made in the console works at once; the first key was never touched.
      const minted = await consoleCall('POST', '/console/api/keys', { scopes: ['backups:read'], expiresInDays: null });
      expect(minted.status).toBe(201);
      expect((await api(server.url, minted.body.apiKey)('GET', '/api/backups')).status).toBe(200);
      expect((await call('GET', '/api/backup-account')).status).toBe(200);
    });

    it('another account never sees these answers: one account per key, also from the cache', async () => {
      const a = await owner();
      const b = await owner();
      expect((await a.call('POST', '/api/backup-account/bootstrap', { json: envelope(4) })).status).toBe(200);
      expect((await cachedRead(a.call, '/api/backup-account')).body.initialized).toBe(true);
      expect((await cachedRead(b.call, '/api/backup-account')).body.initialized).toBe(false);
      const slot = (await a.call('POST', '/api/backups')).body.backupId as string;
      expect((await cachedRead(a.call, '/api/backups')).body.backups.map((x: { id: string }) => x.id)).toEqual([slot]);
      expect((await cachedRead(b.call, '/api/backups')).body.backups).toEqual([]);
    });
  });
}
