/**
 * Deletions that can be undone and a vault that can be rolled back, through HTTP, the console routes and the real
 * `coffer admin` process, on a real server with an injected clock: once on SQLite with the filesystem blob store,
 * once on PostgreSQL with S3 (s3rver, and Ceph's RADOS Gateway). With a grace of 7 days a delete hides the backup (404, not listed) while its
 * ciphertext stays in storage; the owner restores it and it downloads byte-exact; when the grace ends the sweeper
 * removes it and the record is DELETED; purging early and shortening the grace need a fresh sign-in; reset
 * schedules the backups and keeps the envelope; the operator undeletes; plan expiry is not delayed; a rotate is
 * rolled back from the console, also after a burst of rotations; another account sees none of it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { Conformance, conformantApi } from '../helpers/conformance.js';
import { bytes, readyBackup } from '../helpers/fixture.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { type S3Engine, S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { json, runCli } from '../client/helpers.js';
import { assertBuilt } from '../helpers/built.js';

const MIN = 60_000;
const DAY = 86_400_000;

interface Engine {
  name: string;
  skip: boolean;
  /** Starts the server; returns the environment `coffer admin` needs and where a blob key lives in storage. */
  start(
    clock: ManualClock,
  ): Promise<{ server: TestServer; adminEnv: Record<string, string>; stored(key: string): Promise<boolean>; stop(): Promise<void> }>;
}

const sqliteFs: Engine = {
  name: 'SQLite + filesystem blobs',
  skip: false,
  async start(clock) {
    const server = await startTestServer({ clock });
    return {
      server,
      adminEnv: { COFFER_DATA_DIR: server.dataDir },
      stored: async (key) => fs.existsSync(path.join(server.dataDir, 'blobs', key)),
      stop: () => server.stop(),
    };
  },
};

const postgresS3 = (kind: S3Engine): Engine => ({
  name: `PostgreSQL + S3 (${kind})`,
  skip: skipPg || skipEngine(kind),
  async start(clock) {
    requirePg();
    const schema: TestSchema = await createTestSchema('coffer_grace');
    let s3: TestS3 | undefined;
    let server: TestServer | undefined;
    try {
      s3 = await startS3(kind);
      const env = { COFFER_DATABASE_URL: schema.url, ...s3.env };
      server = await startTestServer({ clock, env });
      const started = server;
      const bucket = s3;
      return {
        server: started,
        adminEnv: env,
        stored: (key) => bucket.has(key),
        async stop() {
          await started.stop();
          await bucket.close();
          await schema.drop();
        },
      };
    } catch (error) {
      await server?.stop();
      await s3?.close();
      await schema.drop();
      throw error;
    }
  },
});

for (const engine of [sqliteFs, ...S3_ENGINES.map(postgresS3)]) {
  describe.skipIf(engine.skip)(`deletion grace and vault history: ${engine.name}`, () => {
    const clock = new ManualClock(Date.now());
    let server: TestServer;
    let conformance: Conformance;
    let adminEnv: Record<string, string>;
    let stored: (key: string) => Promise<boolean>;
    let stop: () => Promise<void> = async () => undefined;

    beforeAll(async () => {
      assertBuilt();
      ({ server, adminEnv, stored, stop } = await engine.start(clock));
      conformance = await Conformance.load(server.url);
    });
    afterAll(() => stop());

    const admin = (args: string[]) => runCli(['admin', ...args, '--json'], { ...adminEnv, COFFER_PUBLIC_URL: server.url });

    /** A pro account with a vault (envelope(1)) and, when given, a deletion grace set by the real admin CLI. */
    async function owner(grace?: number, plan: 'free' | 'pro' = 'pro') {
      clock.advance(31 * MIN); // past any cadence of the shared clock
      const { apiKey, accountId, keyId } = await server.newKey({ plan });
      const call = conformantApi(server.url, conformance, apiKey);
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope(1) })).status).toBe(200);
      if (grace !== undefined) {
        expect(json(await admin(['accounts', 'set-deletion-grace', accountId, String(grace)]))).toEqual({
          accountId,
          deletionGraceDays: grace,
        });
      }
      return { apiKey, accountId, keyId, call };
    }

    /** A console session of the account, opened now (a fresh sign-in). */
    async function consoleSession(accountId: string) {
      const { token } = (await server.parts.sessions.createLoginLink(accountId))!;
      const response = await fetch(`${server.url}/console/api/session`, {
        method: 'POST',
        headers: { origin: server.url, 'content-type': 'application/json' },
        body: JSON.stringify({ loginToken: token }),
      });
      expect(response.status).toBe(200);
      return sessionFrom(response);
    }

    async function sessionFrom(response: Response) {
      const cookie = response.headers.get('set-cookie')!.split(';')[0]!;
      const { csrfToken } = (await response.json()) as { csrfToken: string };
      const send = async (method: string, url: string, body?: unknown) => {
        const answer = await fetch(`${server.url}${url}`, {
          method,
          headers: {
            cookie: session.cookie,
            origin: server.url,
            'x-csrf-token': session.csrf,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await answer.text();
        return { status: answer.status, body: text ? JSON.parse(text) : null, headers: answer.headers };
      };
      const session = { cookie, csrf: csrfToken, send };
      return session;
    }

    const blobKeyOf = async (id: string) => (await server.parts.stores.backups.getBackup(id))!.blobKey!;

    it('a delete hides the backup at once but keeps its ciphertext; the owner restores it and it downloads byte-exact', async () => {
      const { call, accountId } = await owner(7);
      const { id, data } = await readyBackup(call, 5000, 3);
      const key = await blobKeyOf(id);
      expect(await stored(key)).toBe(true);

      const deleted = await call('DELETE', `/api/backups/${id}`);
      expect(deleted.status).toBe(200);
      expect(deleted.body).toEqual({ id, status: 'DELETING', deletedAt: null });
      for (const [method, url] of [
        ['GET', `/api/backups/${id}`],
        ['GET', `/api/backups/${id}/content`],
        ['GET', `/api/backups/${id}/events`],
        ['DELETE', `/api/backups/${id}`],
      ] as const) {
        expect((await call(method, url)).status, `${method} ${url}`).toBe(404);
      }
      expect((await call('GET', '/api/backups')).body.backups).toEqual([]);
      expect(await stored(key)).toBe(true);
      // A sweep during the grace leaves it alone.
      await server.sweepOnce();
      expect(await stored(key)).toBe(true);
      expect((await server.parts.stores.backups.getBackup(id))!.status).toBe('DELETING');

      const session = await consoleSession(accountId);
      const listed = await session.send('GET', '/console/api/deletions');
      expect(listed.status).toBe(200);
      expect(listed.body).toMatchObject({ deletionGraceDays: 7, freshSignIn: true, scheduledCiphertextBytes: 5000 });
      expect(listed.body.scheduled).toEqual([
        expect.objectContaining({
          id,
          status: 'DELETING',
          ciphertextSizeBytes: 5000,
          purgeAfter: new Date(clock.now() + 7 * DAY).toISOString(),
        }),
      ]);

      const restored = await session.send('POST', `/console/api/deletions/${id}/restore`);
      expect(restored).toMatchObject({ status: 200, body: { id, status: 'READY', deletedAt: null } });
      expect((await session.send('POST', `/console/api/deletions/${id}/restore`)).status).toBe(404);
      expect((await call('GET', '/api/backups')).body.backups.map((b: { id: string }) => b.id)).toEqual([id]);
      const content = await call('GET', `/api/backups/${id}/content`);
      expect(content.status).toBe(200);
      expect(content.raw.equals(data)).toBe(true);
      expect((await session.send('GET', '/console/api/deletions')).body.scheduled).toEqual([]);
    });

    it('`coffer admin backups undelete` returns a scheduled backup to READY; a reset with deleteBackups schedules and keeps the envelope', async () => {
      const { call, accountId, apiKey } = await owner(7);
      const { id, data } = await readyBackup(call, 2048, 9);
      const reset = await call('POST', '/api/backup-account/reset', { json: { deleteBackups: true } });
      expect(reset.body).toEqual({ reset: true, accountDeleted: true, deletedBackups: 1 });
      expect((await call('GET', '/api/backup-account')).body.initialized).toBe(false);
      expect((await call('GET', `/api/backups/${id}`)).status).toBe(404);
      expect(await stored(await blobKeyOf(id))).toBe(true);

      const undeleted = json(await admin(['backups', 'undelete', id]));
      expect(undeleted).toMatchObject({ backupId: id, accountId, status: 'READY' });
      const again = await admin(['backups', 'undelete', id]);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('is scheduled for deletion');
      expect((await admin(['backups', 'undelete', 'not-a-uuid'])).code).toBe(1);
      expect((await call('GET', `/api/backups/${id}/content`)).raw.equals(data)).toBe(true);

      // The envelope the reset removed: listed with who did it, restored after a fresh sign-in.
      const session = await consoleSession(accountId);
      const history = await session.send('GET', '/console/api/vault/history');
      const keyId = (await server.parts.keys.authenticate(apiKey))!.id;
      expect(history.body.entries).toEqual([expect.objectContaining({ reason: 'reset', replacedBy: { kind: 'api-key', id: keyId } })]);
      // A bootstrap after the reset makes a new vault; the reset's envelope stays restorable.
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope(5) })).body.created).toBe(true);
      const restored = await session.send('POST', `/console/api/vault/history/${history.body.entries[0].id}/restore`);
      expect(restored.status).toBe(200);
      const account = (await call('GET', '/api/backup-account')).body;
      expect(account).toMatchObject({ initialized: true, ...envelope(1) });
      // The bootstrapped envelope it replaced is kept in turn.
      expect((await session.send('GET', '/console/api/vault/history')).body.entries).toEqual([
        expect.objectContaining({ reason: 'restore', replacedBy: { kind: 'console-session', id: expect.any(String) } }),
      ]);

      // Rotates through the API with a console session: one opened by a login link is named by its id, one opened
      // with an API key by that key.
      const keySession = await sessionFrom(
        await fetch(`${server.url}/console/api/session`, {
          method: 'POST',
          headers: { origin: server.url, 'content-type': 'application/json' },
          body: JSON.stringify({ apiKey }),
        }),
      );
      expect((await session.send('POST', '/api/backup-account/rotate', envelope(2))).status).toBe(200);
      expect((await keySession.send('POST', '/api/backup-account/rotate', envelope(3))).status).toBe(200);
      const names = (await session.send('GET', '/console/api/vault/history')).body.entries.map(
        (entry: { replacedBy: unknown }) => entry.replacedBy,
      );
      expect(names).toEqual([
        { kind: 'api-key', id: keyId },
        { kind: 'console-session', id: expect.any(String) },
        { kind: 'console-session', id: expect.any(String) },
      ]);
    });

    it('when the grace ends the sweeper removes the ciphertext and the record becomes DELETED', async () => {
      const { call, accountId } = await owner(7);
      const { id } = await readyBackup(call, 1500);
      const key = await blobKeyOf(id);
      expect((await call('DELETE', `/api/backups/${id}`)).body.status).toBe('DELETING');
      clock.advance(7 * DAY - 1000);
      await server.sweepOnce();
      expect(await stored(key)).toBe(true);
      clock.advance(2000);
      await server.sweepOnce();
      const record = (await server.parts.stores.backups.getBackup(id))!;
      expect(record.status).toBe('DELETED');
      expect(record.deletedAt).toBe(clock.now());
      expect(await stored(key)).toBe(false);
      const session = await consoleSession(accountId);
      expect((await session.send('POST', `/console/api/deletions/${id}/restore`)).status).toBe(404);
      expect((await session.send('GET', '/console/api/deletions')).body.scheduled).toEqual([]);
    });

    it('purging early and shortening the grace need a fresh sign-in', async () => {
      const { call, accountId, apiKey } = await owner(7);
      const { id } = await readyBackup(call, 1000);
      const key = await blobKeyOf(id);
      await call('DELETE', `/api/backups/${id}`);
      const stale = await consoleSession(accountId);
      clock.advance(6 * MIN);
      expect((await stale.send('GET', '/console/api/deletions')).body.freshSignIn).toBe(false);
      const refused = await stale.send('POST', `/console/api/deletions/${id}/purge`);
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ code: 'reauthentication_required', details: { freshSignInSeconds: 300 } });
      expect(await stored(key)).toBe(true);
      const shorten = await stale.send('PUT', '/console/api/deletions/grace', { days: 1 });
      expect(shorten.body.code).toBe('reauthentication_required');
      // Lengthening is no risk: no fresh sign-in needed.
      expect((await stale.send('PUT', '/console/api/deletions/grace', { days: 10 })).body).toEqual({ deletionGraceDays: 10 });
      expect((await stale.send('PUT', '/console/api/deletions/grace', { days: 91 })).status).toBe(400);

      // Another account's key does not confirm this account (and its session is not opened).
      const stranger = await server.newKey({ plan: 'pro' });
      const wrong = await stale.send('POST', '/console/api/session/confirm', { apiKey: stranger.apiKey });
      expect(wrong.body.code).toBe('reauthentication_required');
      expect((await stale.send('POST', '/console/api/session/confirm', { apiKey: 'cfk_nonsense' })).body.code).toBe(
        'reauthentication_required',
      );

      const confirmed = await fetch(`${server.url}/console/api/session/confirm`, {
        method: 'POST',
        headers: { cookie: stale.cookie, origin: server.url, 'x-csrf-token': stale.csrf, 'content-type': 'application/json' },
        body: JSON.stringify({ apiKey }),
      });
      expect(confirmed.status).toBe(200);
      const fresh = await sessionFrom(confirmed);
      // The confirmation replaced the old session.
      expect((await stale.send('GET', '/console/api/deletions')).status).toBe(401);
      const purged = await fresh.send('POST', `/console/api/deletions/${id}/purge`);
      expect(purged).toMatchObject({ status: 200, body: { id, status: 'DELETED', deletedAt: new Date(clock.now()).toISOString() } });
      expect(await stored(key)).toBe(false);
      expect((await fresh.send('POST', `/console/api/deletions/${id}/restore`)).status).toBe(404);
      expect((await fresh.send('PUT', '/console/api/deletions/grace', { days: 0 })).body).toEqual({ deletionGraceDays: 0 });
    });

    it('plan expiry is not delayed by the grace', async () => {
      const { call } = await owner(30, 'free'); // free plan: kept 7 days
      const { id } = await readyBackup(call, 800);
      const key = await blobKeyOf(id);
      clock.advance(5 * DAY);
      await call('DELETE', `/api/backups/${id}`);
      expect((await server.parts.stores.backups.getBackup(id))!.purgeAfter).toBe(
        (await server.parts.stores.backups.getBackup(id))!.expiresAt,
      );
      clock.advance(2 * DAY);
      await server.sweepOnce();
      expect((await server.parts.stores.backups.getBackup(id))!.status).toBe('DELETED');
      expect(await stored(key)).toBe(false);
    });

    it('with no grace (the default) a delete removes the backup at once', async () => {
      const { call, accountId } = await owner();
      const { id } = await readyBackup(call, 700);
      const key = await blobKeyOf(id);
      const deleted = await call('DELETE', `/api/backups/${id}`);
      expect(deleted.body).toEqual({ id, status: 'DELETED', deletedAt: new Date(clock.now()).toISOString() });
      expect(await stored(key)).toBe(false);
      const rotated = await call('POST', '/api/backup-account/rotate', { json: envelope(2) });
      expect(rotated.headers.get('x-coffer-vault-history-days')).toBe('0');
      const session = await consoleSession(accountId);
      expect((await session.send('GET', '/console/api/vault/history')).body).toMatchObject({ deletionGraceDays: 0, entries: [] });
    });

    it('a rotate with garbage is rolled back from the console; another account sees and touches none of it', async () => {
      const { call, accountId, keyId } = await owner(7);
      const { id } = await readyBackup(call, 600);
      await call('DELETE', `/api/backups/${id}`);
      const garbage = { ...envelope(0xee), kdf: { salt: bytes(16, 1).toString('base64'), opslimit: 1, memlimit: 1 } };
      const rotated = await call('POST', '/api/backup-account/rotate', { json: garbage });
      expect(rotated.status).toBe(200);
      expect(rotated.headers.get('x-coffer-vault-history-days')).toBe('7');

      const session = await consoleSession(accountId);
      const history = (await session.send('GET', '/console/api/vault/history')).body;
      expect(history.entries).toEqual([
        expect.objectContaining({
          reason: 'rotate',
          replacedBy: { kind: 'api-key', id: keyId },
          expiresAt: new Date(clock.now() + 7 * DAY).toISOString(),
          kdf: { opslimit: envelope(1).kdf.opslimit, memlimit: envelope(1).kdf.memlimit },
        }),
      ]);
      const entry = history.entries[0].id as string;

      const stranger = await server.newKey({ plan: 'pro' });
      const other = await consoleSession(stranger.accountId);
      expect((await other.send('GET', '/console/api/deletions')).body.scheduled).toEqual([]);
      expect((await other.send('GET', '/console/api/vault/history')).body.entries).toEqual([]);
      expect((await other.send('POST', `/console/api/deletions/${id}/restore`)).status).toBe(404);
      expect((await other.send('POST', `/console/api/deletions/${id}/purge`)).status).toBe(404);
      expect((await other.send('POST', `/console/api/vault/history/${entry}/restore`)).status).toBe(404);
      expect((await other.send('POST', '/console/api/vault/history/not-a-uuid/restore')).status).toBe(404);
      expect((await call('GET', '/api/backup-account')).body).toMatchObject(garbage);
      expect((await server.parts.stores.backups.getBackup(id))!.status).toBe('DELETING');

      // A burst of garbage rotations cannot push the real envelope out of the bounded history.
      for (let i = 0; i < 12; i++) {
        expect((await call('POST', '/api/backup-account/rotate', { json: envelope(0x10 + i) })).status).toBe(200);
      }
      const burst = (await session.send('GET', '/console/api/vault/history')).body.entries;
      expect(burst).toHaveLength(10);
      expect(burst.at(-1).id).toBe(entry);

      const restored = await session.send('POST', `/console/api/vault/history/${entry}/restore`);
      expect(restored).toMatchObject({ status: 200, body: { restoredAt: new Date(clock.now()).toISOString() } });
      expect((await call('GET', '/api/backup-account')).body).toMatchObject({ initialized: true, ...envelope(1) });
      expect((await session.send('POST', `/console/api/vault/history/${entry}/restore`)).status).toBe(404);
      // Kept envelopes go when their time is up.
      clock.advance(7 * DAY + 1);
      await server.sweepOnce();
      expect(await server.parts.stores.vaults.listVaultHistory(accountId, clock.now() - 8 * DAY)).toEqual([]);
    });
  });
}
