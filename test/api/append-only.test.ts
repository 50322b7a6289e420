/**
 * Append-only keys and the audit trail, end to end on a real server (SQLite, and PostgreSQL when it answers): the
 * admin CLI makes and lists an append-only key; the real `coffer backup` makes a whole backup with it (sealed to the
 * vault's recipient, no passphrase); delete, reset, rotate and re-bootstrap are refused with 403 insufficient_scope
 * (`details.reason: "append_only"`) over HTTP and through the CLI, and nothing changes (the backup still lists,
 * downloads and restores byte-identical, the vault is the same); the audit trail records every step with the right
 * actor and address and no secret; another account never sees it.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { v4 as uuidv4 } from 'uuid';
import { api, envelope } from '../helpers/api.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, runCli, snapshot } from '../client/helpers.js';

const PASSPHRASE = 'append-only test passphrase';
const HOST_SCOPES = 'backups:read,backups:write';

interface AuditRow {
  at: string;
  action: string;
  outcome: 'done' | 'refused';
  actor: { kind: string; id: string | null };
  address: string | null;
  target: string | null;
  detail: string | null;
}

const ENGINES = [
  { name: 'sqlite', pg: false, skip: false },
  { name: 'postgres', pg: true, skip: skipPg },
];

for (const engine of ENGINES) {
  describe.skipIf(engine.skip)(`append-only keys and the audit trail: ${engine.name}`, () => {
    // The real clock: entries the admin CLI records (its own process) and the server's are ordered by one time line.
    let server: TestServer;
    let schema: TestSchema | undefined;
    let adminEnv: Record<string, string>;
    let work: string;
    let source: string;
    let accountId: string;
    let ownerKey: string;
    let ownerKeyId: string;
    let hostKey: string;
    let hostKeyId: string;
    let recipient: string;
    let backupId: string;
    let owner: ReturnType<typeof cliFor>;
    let host: ReturnType<typeof cliFor>;
    let ownerCall: ReturnType<typeof api>;
    let hostCall: ReturnType<typeof api>;

    const admin = (args: string[]) => runCli(['admin', ...args], adminEnv);
    const adminJson = async <T = any>(args: string[]) => json<T>(await admin([...args, '--json']));
    const trail = async (id = accountId) => (await adminJson<{ events: AuditRow[] }>(['audit', id])).events;

    /** Everything an append-only key could destroy or replace, as the owner reads it. */
    async function state() {
      const account = await ownerCall('GET', '/api/backup-account');
      const list = await ownerCall('GET', '/api/backups');
      const content = await ownerCall('GET', `/api/backups/${backupId}/content`);
      expect([account.status, list.status, content.status]).toEqual([200, 200, 200]);
      return { account: account.body, list: list.body, content: content.raw.toString('base64') };
    }

    function expectAppendOnlyRefusal(response: { status: number; body: any }, action: string) {
      expect(response.status).toBe(403);
      expect(response.body).toMatchObject({
        code: 'insufficient_scope',
        details: { reason: 'append_only', action },
      });
      expect(response.body.message).toMatch(/append-only/);
      expect(response.body.resolution).toMatch(/append-only: it may add backups but not delete them/);
    }

    beforeAll(async () => {
      assertBuilt();
      const env: Record<string, string> = {};
      if (engine.pg) {
        requirePg();
        schema = await createTestSchema('coffer_appendonly');
        env.COFFER_DATABASE_URL = schema.url;
      }
      server = await startTestServer({ env });
      adminEnv = engine.pg ? { COFFER_DATABASE_URL: schema!.url } : { COFFER_DATA_DIR: server.dataDir };
      ({ accountId, apiKey: ownerKey, keyId: ownerKeyId } = await server.newKey({ plan: 'pro' }));
      owner = cliFor(server.url, ownerKey, PASSPHRASE);
      ownerCall = api(server.url, ownerKey);
      work = tempDir('coffer-append-only-');
      source = path.join(work, 'source');
      await makeTree(source);
      expect((await owner(['init'])).code).toBe(0);
      ({ recipient } = json(await owner(['recipient', '--json'])));
    });

    afterAll(async () => {
      await server?.stop();
      await schema?.drop();
    });

    it('the admin CLI creates an append-only key and lists it as such', async () => {
      const made = await adminJson(['keys', 'create', '--account', accountId, '--scopes', HOST_SCOPES, '--append-only']);
      expect(made).toMatchObject({ accountId, plan: 'pro', scopes: ['backups:read', 'backups:write'], appendOnly: true, expiresAt: null });
      ({ apiKey: hostKey, keyId: hostKeyId } = made);
      host = cliFor(server.url, hostKey, undefined);
      hostCall = api(server.url, hostKey);

      const listed = await adminJson<{ keys: { keyId: string; appendOnly: boolean }[] }>(['keys', 'list', '--account', accountId]);
      expect(listed.keys.map((k) => [k.keyId, k.appendOnly])).toEqual([
        [ownerKeyId, false],
        [hostKeyId, true],
      ]);
      const text = await admin(['keys', 'list', '--account', accountId]);
      expect(text.code, text.stderr).toBe(0);
      const lines = text.stdout.trim().split('\n');
      expect(lines.find((l) => l.startsWith(hostKeyId))).toMatch(/backups:read,backups:write append-only/);
      expect(lines.find((l) => l.startsWith(ownerKeyId))).not.toMatch(/append-only/);
      const human = await admin(['keys', 'create', '--account', accountId, '--scopes', 'backups:read', '--append-only']);
      expect(human.stdout).toMatch(/scopes: backups:read \(append-only: cannot delete, reset or rotate\)/);
      const second = /key (\S+) for account/.exec(human.stdout)![1]!;
      expect((await admin(['keys', 'revoke', second])).code).toBe(0);
    });

    it('an append-only key makes a whole backup with the real `coffer backup` (create, upload, finalize), lists and watches', async () => {
      const result = await host(['backup', source, '--json'], { COFFER_RECIPIENT: recipient });
      const made = json<{ id: string; status: string }>(result);
      expect(made.status).toBe('READY');
      backupId = made.id;
      const listed = json<{ backups: { id: string }[] }>(await host(['list', '--json']));
      expect(listed.backups.map((b) => b.id)).toEqual([backupId]);
      const events = await hostCall('GET', `/api/backups/${backupId}/events`);
      expect(events.status).toBe(200);
      expect(events.text).toContain('"status":"READY"');
      // No restore scope: the host cannot take the ciphertext away either.
      expect((await hostCall('GET', `/api/backups/${backupId}/content`)).status).toBe(403);
    });

    it('never hands an append-only key the wrapped master key, its nonce or the KDF parameters; a normal key still gets them', async () => {
      const held = await hostCall('GET', '/api/backup-account');
      expect(held.status).toBe(200);
      expect(held.body).toMatchObject({ initialized: true, kdf: null, wrappedMasterKey: null, wrappedMasterKeyNonce: null });
      const full = await ownerCall('GET', '/api/backup-account');
      expect(full.status).toBe(200);
      expect(full.body.initialized).toBe(true);
      expect(typeof full.body.wrappedMasterKey).toBe('string');
      expect(typeof full.body.wrappedMasterKeyNonce).toBe('string');
      expect(full.body.kdf).toMatchObject({ opslimit: expect.any(Number), memlimit: expect.any(Number) });
    });

    it('is refused delete, reset, rotate and re-bootstrap over HTTP and through the CLI, and nothing changes', async () => {
      const before = await state();

      expectAppendOnlyRefusal(await hostCall('DELETE', `/api/backups/${backupId}`), 'backup.delete');
      // Refused before the id is looked at: an unknown id gets the same answer, not a 404.
      expectAppendOnlyRefusal(await hostCall('DELETE', `/api/backups/${uuidv4()}`), 'backup.delete');
      expectAppendOnlyRefusal(await hostCall('POST', '/api/backup-account/reset', { json: {} }), 'account.reset');
      expectAppendOnlyRefusal(await hostCall('POST', '/api/backup-account/reset', { json: { deleteBackups: true } }), 'account.reset');
      expectAppendOnlyRefusal(await hostCall('POST', '/api/backup-account/rotate', { json: envelope(9) }), 'account.rotate');
      expectAppendOnlyRefusal(await hostCall('POST', '/api/backup-account/bootstrap', { json: envelope(9) }), 'account.bootstrap');

      const deleted = await host(['delete', backupId]);
      expect(deleted.code).not.toBe(0);
      expect(deleted.stderr).toMatch(/append-only/);
      const reset = await host(['reset', '--delete-backups', '--yes']);
      expect(reset.code).not.toBe(0);
      expect(reset.stderr).toMatch(/append-only/);

      expect(await state()).toEqual(before);
      const target = path.join(work, 'restored');
      const restored = await owner(['restore', backupId, target]);
      expect(restored.code, restored.stderr).toBe(0);
      expect(await snapshot(target)).toEqual(await snapshot(source));
    });

    it('may bootstrap a vault that does not exist yet, never one that does; cannot open the console', async () => {
      // An append-only key needs --account: the account comes from a first key.
      const holder = await adminJson(['keys', 'create', '--plan', 'free']);
      const fresh = await adminJson(['keys', 'create', '--account', holder.accountId, '--append-only']);
      expect(fresh.scopes).toEqual(['backups:read', 'backups:write', 'backups:restore']);
      const call = api(server.url, fresh.apiKey);
      const first = await call('POST', '/api/backup-account/bootstrap', { json: envelope(4) });
      expect(first.status).toBe(200);
      expect(first.body.created).toBe(true);
      expectAppendOnlyRefusal(await call('POST', '/api/backup-account/bootstrap', { json: envelope(5) }), 'account.bootstrap');
      // An append-only key never reads the material back (not even the vault it made).
      expect((await call('GET', '/api/backup-account')).body).toMatchObject({ initialized: true, wrappedMasterKey: null, kdf: null });

      const signIn = await api(server.url)('POST', '/console/api/session', {
        json: { apiKey: fresh.apiKey },
        headers: { origin: server.url },
      });
      expect(signIn.status).toBe(403);
      expect(signIn.body).toMatchObject({ code: 'insufficient_scope', details: { reason: 'append_only' } });
      expect(signIn.headers.get('set-cookie')).toBeNull();
      const theirs = await trail(fresh.accountId);
      expect(theirs.map((e) => [e.action, e.outcome])).toEqual([
        ['account.bootstrap', 'refused'],
        ['account.bootstrap', 'done'],
        ['key.create', 'done'],
        ['key.create', 'done'],
      ]);
    });

    it('the owner (a full key) can still delete; a plan change and a revoke are recorded too', async () => {
      expect((await ownerCall('DELETE', `/api/backups/${backupId}`)).status).toBe(200);
      expect((await admin(['accounts', 'set-plan', accountId, 'plus'])).code).toBe(0);
      expect((await admin(['keys', 'revoke', hostKeyId])).code).toBe(0);
    });

    it('the audit trail records each step with the right actor and address, and no secret', async () => {
      const events = await trail();
      const vault = (await ownerCall('GET', '/api/backup-account')).body as { wrappedMasterKey: string; kdf: { salt: string } };
      const text = JSON.stringify(events);
      for (const secret of [ownerKey, hostKey, vault.wrappedMasterKey, vault.kdf.salt, recipient, 'cfk_', 'cfl_', 'cfs_']) {
        expect(text).not.toContain(secret);
      }
      const byKey = (id: string) => ({ kind: 'key', id });
      const operator = expect.objectContaining({ kind: 'operator' });
      const oldestFirst = [...events].reverse();
      expect(
        oldestFirst.map(({ action, outcome, actor, address, target, detail }) => ({ action, outcome, actor, address, target, detail })),
      ).toEqual([
        { action: 'account.bootstrap', outcome: 'done', actor: byKey(ownerKeyId), address: '127.0.0.1', target: null, detail: null },
        {
          action: 'key.create',
          outcome: 'done',
          actor: operator,
          address: null,
          target: hostKeyId,
          detail: 'backups:read,backups:write; append-only',
        },
        {
          action: 'key.create',
          outcome: 'done',
          actor: operator,
          address: null,
          target: expect.any(String),
          detail: 'backups:read; append-only',
        },
        { action: 'key.revoke', outcome: 'done', actor: operator, address: null, target: expect.any(String), detail: null },
        { action: 'backup.delete', outcome: 'refused', actor: byKey(hostKeyId), address: '127.0.0.1', target: backupId, detail: null },
        {
          action: 'backup.delete',
          outcome: 'refused',
          actor: byKey(hostKeyId),
          address: '127.0.0.1',
          target: expect.any(String),
          detail: null,
        },
        { action: 'account.reset', outcome: 'refused', actor: byKey(hostKeyId), address: '127.0.0.1', target: null, detail: null },
        { action: 'account.reset', outcome: 'refused', actor: byKey(hostKeyId), address: '127.0.0.1', target: null, detail: null },
        { action: 'account.rotate', outcome: 'refused', actor: byKey(hostKeyId), address: '127.0.0.1', target: null, detail: null },
        { action: 'account.bootstrap', outcome: 'refused', actor: byKey(hostKeyId), address: '127.0.0.1', target: null, detail: null },
        { action: 'backup.delete', outcome: 'refused', actor: byKey(hostKeyId), address: '127.0.0.1', target: backupId, detail: null },
        { action: 'account.reset', outcome: 'refused', actor: byKey(hostKeyId), address: '127.0.0.1', target: null, detail: null },
        { action: 'backup.delete', outcome: 'done', actor: byKey(ownerKeyId), address: '127.0.0.1', target: backupId, detail: null },
        { action: 'account.plan', outcome: 'done', actor: operator, address: null, target: null, detail: 'pro → plus' },
        { action: 'key.revoke', outcome: 'done', actor: operator, address: null, target: hostKeyId, detail: null },
      ]);
      // The human form names the same steps.
      const human = await admin(['audit', accountId]);
      expect(human.code, human.stderr).toBe(0);
      expect(human.stdout).toMatch(/^AT\s+ACTION\s+BY\s+FROM\s+ON\s+DETAIL$/m);
      expect(human.stdout).toMatch(
        new RegExp(`^\\S+\\s+backup\\.delete \\(refused\\)\\s+key ${hostKeyId}\\s+127\\.0\\.0\\.1\\s+${backupId}\\s+-$`, 'm'),
      );
    });

    it('the console shows the trail to its owner, and another account never sees it', async () => {
      const signIn = async (id: string) => {
        const { url } = await adminJson<{ url: string }>(['login-link', id]);
        const loginToken = new URL(url).hash.replace('#token=', '');
        const opened = await api(server.url)('POST', '/console/api/session', { json: { loginToken }, headers: { origin: server.url } });
        expect(opened.status).toBe(200);
        const cookie = opened.headers.get('set-cookie')!.split(';')[0]!;
        return (path: string) => api(server.url)('GET', path, { headers: { cookie } });
      };
      const mine = (await (await signIn(accountId))('/console/api/audit')).body as { events: { id: string; action: string }[] };
      expect(mine.events.map((e) => e.action)).toEqual((await trail()).map((e) => e.action));

      const other = await server.newKey({ plan: 'free' });
      const theirs = await signIn(other.accountId);
      const seen = await theirs('/console/api/audit');
      expect(seen.status).toBe(200);
      expect(seen.body).toEqual({ events: [], maxEntries: 1000 });
      // No parameter reaches another account's trail.
      const probing = await theirs(`/console/api/audit?accountId=${accountId}`);
      expect(probing.body).toEqual({ events: [], maxEntries: 1000 });
      // Nor does the API key of the owner, nor no credential at all.
      expect((await ownerCall('GET', '/console/api/audit')).status).toBe(401);
      expect((await api(server.url)('GET', '/console/api/audit')).status).toBe(401);
    });
  });
}

describe('/openapi.json describes append-only keys', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server?.stop());

  it('declares 403 on every operation and describes the restriction in the API-key schemes', async () => {
    const document = (await api(server.url)('GET', '/openapi.json')).body as {
      paths: Record<string, Record<string, { operationId?: string; responses: Record<string, unknown> }>>;
      components: { securitySchemes: Record<string, { description?: string }> };
    };
    const operations = Object.values(document.paths).flatMap((item) => Object.values(item));
    expect(operations.length).toBeGreaterThan(10);
    for (const operation of operations) expect(Object.keys(operation.responses), operation.operationId).toContain('403');
    for (const scheme of ['bearerAuth', 'apiKeyHeader']) {
      expect(document.components.securitySchemes[scheme]!.description).toMatch(/append-only[^]*details\.reason: "append_only"/);
    }
  });
});

describe('a write-only append-only host key (backups:write, no read)', () => {
  let server: TestServer;
  afterAll(async () => {
    await server?.stop();
  });

  it('backs up with the real `coffer backup` sealed to COFFER_RECIPIENT, and the owner restores it', async () => {
    assertBuilt();
    server = await startTestServer({});
    const { accountId, apiKey: ownerKey } = await server.newKey({ plan: 'pro' });
    const owner = cliFor(server.url, ownerKey, PASSPHRASE);
    const work = tempDir('coffer-write-only-');
    const source = path.join(work, 'source');
    await makeTree(source);
    expect((await owner(['init'])).code).toBe(0);
    const { recipient } = json<{ recipient: string }>(await owner(['recipient', '--json']));
    const made = json<{ apiKey: string }>(
      await runCli(['admin', 'keys', 'create', '--account', accountId, '--scopes', 'backups:write', '--append-only', '--json'], {
        COFFER_DATA_DIR: server.dataDir,
      }),
    );
    const host = cliFor(server.url, made.apiKey, undefined);
    const result = await host(['backup', source, '--json'], { COFFER_RECIPIENT: recipient });
    expect(result.code, result.stderr).toBe(0);
    const backup = json<{ id: string; status: string }>(result);
    expect(backup.status).toBe('READY');
    const target = path.join(work, 'restored');
    const restored = await owner(['restore', backup.id, target]);
    expect(restored.code, restored.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(source));
  });
});
