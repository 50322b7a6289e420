/**
 * The exact bodies of the console's own endpoints (/console/api/*), over real HTTP with a test clock: every field,
 * no more and no fewer, so the page's types (derived from the same schemas) and the server cannot drift apart.
 */
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const iso = (ms: number) => new Date(ms).toISOString();
const HOUR = 3_600_000;

describe('console endpoint bodies', () => {
  const clock = new ManualClock();
  const start = clock.now();
  let server: TestServer;
  let accountId: string;
  let ownerKeyId: string;
  let call: ReturnType<typeof api>;
  let cookie: string;
  let csrf: string;

  const consoleCall = async (method: string, path: string, json?: unknown) =>
    api(server.url)(method, path, { json, headers: { cookie, origin: server.url, 'x-csrf-token': csrf } });

  beforeAll(async () => {
    server = await startTestServer({ clock });
    let apiKey: string;
    ({ accountId, apiKey, keyId: ownerKeyId } = await server.newKey({ plan: 'plus' }));
    call = api(server.url, apiKey);
  });
  afterAll(() => server?.stop());

  it('session: sign-in and the current session', async () => {
    const token = (await server.parts.sessions.createLoginLink(accountId))!.token;
    const signIn = await api(server.url)('POST', '/console/api/session', { json: { loginToken: token }, headers: { origin: server.url } });
    expect(signIn.status).toBe(200);
    cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    csrf = (signIn.body as { csrfToken: string }).csrfToken;
    const session = {
      accountId,
      plan: 'plus',
      signedInWith: 'login-link',
      keyId: null,
      createdAt: iso(start),
      expiresAt: iso(start + 12 * HOUR),
      csrfToken: csrf,
    };
    expect(signIn.body).toEqual(session);
    expect((await consoleCall('GET', '/console/api/session')).body).toEqual(session);
  });

  it('overview: before the vault, with a READY backup (cadence), and with one in flight', async () => {
    const noVault = await consoleCall('GET', '/console/api/overview');
    expect(noVault.status).toBe(200);
    expect(noVault.body).toEqual({
      accountId,
      accountLabel: null,
      plan: 'plus',
      backupInterval: '4h',
      intervalWords: '4 hours',
      retentionDays: 30,
      backups: { count: 0, ready: 0, newestCreatedAt: null, storedCiphertextBytes: 0 },
      storage: { storedBytes: 0, quotaBytes: null },
      cadence: { lastReadyBackupCreatedAt: null, lastReadyAt: null, overdue: false, nextAllowedAt: null, inFlightBackupId: null },
      vault: { initialized: false, cryptoVersion: null, kdf: null, createdAt: null, updatedAt: null, lastRotatedAt: null },
    });

    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const created = await call('POST', '/api/backups');
    const readyId = (created.body as { backupId: string }).backupId;
    const uploaded = await call('POST', `/api/backups/upload?backupId=${readyId}`, {
      body: new Uint8Array(1000),
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(uploaded.status).toBe(201);
    expect((await call('POST', `/api/backups/${readyId}/finalize`, { json: finalizeBody(1000) })).status).toBe(200);

    clock.advance(HOUR);
    expect((await call('POST', '/api/backup-account/rotate', { json: envelope(2) })).status).toBe(200);
    const kdf = { algorithm: 'Argon2id13', opslimit: 2, memlimit: 67_108_864, saltBytes: 16 };
    const vault = {
      initialized: true,
      cryptoVersion: 'v1',
      kdf,
      createdAt: iso(start),
      updatedAt: iso(start + HOUR),
      lastRotatedAt: iso(start + HOUR),
    };
    const ready = await consoleCall('GET', '/console/api/overview');
    expect(ready.body).toEqual({
      accountId,
      accountLabel: null,
      plan: 'plus',
      backupInterval: '4h',
      intervalWords: '4 hours',
      retentionDays: 30,
      backups: { count: 1, ready: 1, newestCreatedAt: iso(start), storedCiphertextBytes: 1000 },
      storage: { storedBytes: 1000, quotaBytes: null },
      cadence: {
        lastReadyBackupCreatedAt: iso(start),
        lastReadyAt: iso(start),
        overdue: false,
        nextAllowedAt: iso(start + 4 * HOUR),
        inFlightBackupId: null,
      },
      vault,
    });

    clock.advance(3 * HOUR);
    const slot = await call('POST', '/api/backups');
    expect(slot.status).toBe(201);
    const inFlight = await consoleCall('GET', '/console/api/overview');
    expect(inFlight.body).toMatchObject({
      backups: { count: 2, ready: 1, newestCreatedAt: iso(start + 4 * HOUR), storedCiphertextBytes: 1000 },
      cadence: {
        lastReadyBackupCreatedAt: iso(start),
        nextAllowedAt: null,
        inFlightBackupId: (slot.body as { backupId: string }).backupId,
      },
    });

    // Usage against the quota: the account's own quota when the operator set one, none when it returns to its plan's.
    await server.parts.quotas.setQuota(accountId, 1500);
    expect((await consoleCall('GET', '/console/api/overview')).body).toMatchObject({ storage: { storedBytes: 1000, quotaBytes: 1500 } });
    await server.parts.quotas.setQuota(accountId, undefined);
    expect((await consoleCall('GET', '/console/api/overview')).body).toMatchObject({ storage: { storedBytes: 1000, quotaBytes: null } });

    // Overdue: no backup reached READY within twice the interval (8 hours on plus); the slot in flight does not count.
    clock.advance(4 * HOUR);
    expect((await consoleCall('GET', '/console/api/overview')).body).toMatchObject({
      cadence: { lastReadyAt: iso(start), overdue: false },
    });
    clock.advance(1);
    expect((await consoleCall('GET', '/console/api/overview')).body).toMatchObject({ cadence: { lastReadyAt: iso(start), overdue: true } });
  });

  it('keys: list, create and revoke', async () => {
    const owner = {
      keyId: ownerKeyId,
      scopes: ['backups:read', 'backups:write', 'backups:restore'],
      appendOnly: false,
      label: null,
      createdAt: iso(start),
      expiresAt: null,
      revokedAt: null,
      status: 'active',
      usedByThisSession: false,
    };
    expect((await consoleCall('GET', '/console/api/keys')).body).toEqual({ keys: [owner] });

    const now = clock.now();
    // A label is plain text of letters, digits, spaces and a few signs: markup, control characters, a secret, an empty
    // or too long one are refused (400) and no key is made.
    for (const label of ['<b>laptop</b>', 'line\nbreak', ' padded', 'x'.repeat(49), `cfk_${'A'.repeat(43)}`, '']) {
      const refused = await consoleCall('POST', '/console/api/keys', { scopes: ['backups:read'], expiresInDays: 2, label });
      expect(refused.status, label).toBe(400);
      expect((refused.body as { code: string }).code).toBe('validation_failed');
    }
    expect(((await consoleCall('GET', '/console/api/keys')).body as { keys: unknown[] }).keys).toHaveLength(1);
    const created = await consoleCall('POST', '/console/api/keys', {
      scopes: ['backups:read'],
      expiresInDays: 2,
      label: "Anna's laptop (work)",
    });
    expect(created.status).toBe(201);
    const { keyId, apiKey } = created.body as { keyId: string; apiKey: string };
    const made = {
      keyId,
      scopes: ['backups:read'],
      appendOnly: false,
      label: "Anna's laptop (work)",
      createdAt: iso(now),
      expiresAt: iso(now + 48 * HOUR),
      revokedAt: null,
      status: 'active',
      usedByThisSession: false,
    };
    expect(created.body).toEqual({ ...made, apiKey, expiryCapped: false });
    expect((await consoleCall('GET', '/console/api/keys')).body).toEqual({ keys: [made, owner] });

    clock.advance(1000);
    const revoked = await consoleCall('DELETE', `/console/api/keys/${keyId}`);
    expect(revoked.body).toEqual({ ...made, revokedAt: iso(now + 1000), status: 'revoked' });
    expect((await consoleCall('GET', '/console/api/keys')).body).toEqual({
      keys: [{ ...made, revokedAt: iso(now + 1000), status: 'revoked' }, owner],
    });

    // An append-only key: the restriction is in the answer and the list.
    const host = await consoleCall('POST', '/console/api/keys', {
      scopes: ['backups:read', 'backups:write'],
      expiresInDays: null,
      appendOnly: true,
    });
    expect(host.status).toBe(201);
    const hostKey = host.body as { keyId: string; apiKey: string };
    const hostView = {
      keyId: hostKey.keyId,
      scopes: ['backups:read', 'backups:write'],
      appendOnly: true,
      label: null,
      createdAt: iso(now + 1000),
      expiresAt: null,
      revokedAt: null,
      status: 'active',
      usedByThisSession: false,
    };
    expect(host.body).toEqual({ ...hostView, apiKey: hostKey.apiKey, expiryCapped: false });
    expect(((await consoleCall('GET', '/console/api/keys')).body as { keys: unknown[] }).keys[0]).toEqual(hostView);

    // The audit trail: the three key changes, newest first, by this session, from loopback, never the secrets.
    const trail = await consoleCall('GET', '/console/api/audit');
    expect(trail.status).toBe(200);
    const entry = (at: number, action: string, target: string | null, detail: string | null, targetLabel: string | null = null) => ({
      id: expect.any(String),
      at: iso(at),
      action,
      outcome: 'done',
      actor: { kind: 'session', id: expect.any(String) },
      actorLabel: null,
      targetLabel,
      byThisSession: true,
      address: '127.0.0.1',
      target,
      detail,
    });
    expect(trail.body).toEqual({
      events: [
        entry(now + 1000, 'key.create', hostKey.keyId, 'backups:read,backups:write; append-only'),
        entry(now + 1000, 'key.revoke', keyId, null, "Anna's laptop (work)"),
        entry(now, 'key.create', keyId, '"Anna\'s laptop (work)": backups:read', "Anna's laptop (work)"),
        // The overview test set up the vault and rotated it with the owner's key.
        { ...entry(start + HOUR, 'account.rotate', null, null), actor: { kind: 'key', id: ownerKeyId }, byThisSession: false },
        { ...entry(start, 'account.bootstrap', null, null), actor: { kind: 'key', id: ownerKeyId }, byThisSession: false },
      ],
      maxEntries: 1000,
    });
    expect(JSON.stringify(trail.body)).not.toContain(apiKey);
    expect(JSON.stringify(trail.body)).not.toContain(hostKey.apiKey);
  });

  it('keys: an expired key, and the key a session was opened with', async () => {
    const { keyId, apiKey } = await server.newKey({ accountId, expiresInMs: 13 * HOUR });
    const signIn = await api(server.url)('POST', '/console/api/session', { json: { apiKey }, headers: { origin: server.url } });
    const session = signIn.body as { csrfToken: string; createdAt: string };
    const withKey = { cookie: signIn.headers.get('set-cookie')!.split(';')[0]!, origin: server.url, 'x-csrf-token': session.csrfToken };
    expect(signIn.body).toEqual({
      accountId,
      plan: 'plus',
      signedInWith: 'api-key',
      keyId,
      createdAt: iso(clock.now()),
      expiresAt: iso(clock.now() + 12 * HOUR),
      csrfToken: session.csrfToken,
    });
    const short = await api(server.url)('POST', '/console/api/keys', {
      json: { scopes: ['backups:read'], expiresInDays: null },
      headers: withKey,
    });
    expect(short.body).toMatchObject({ expiresAt: iso(clock.now() + 13 * HOUR), expiryCapped: true, usedByThisSession: false });
    const list = (await api(server.url)('GET', '/console/api/keys', { headers: withKey })).body as {
      keys: { keyId: string; usedByThisSession: boolean }[];
    };
    expect(list.keys.find((k) => k.keyId === keyId)).toMatchObject({ status: 'active', usedByThisSession: true });
    clock.advance(14 * HOUR);
    const token = (await server.parts.sessions.createLoginLink(accountId))!.token;
    const later = await api(server.url)('POST', '/console/api/session', { json: { loginToken: token }, headers: { origin: server.url } });
    cookie = later.headers.get('set-cookie')!.split(';')[0]!;
    const keys = (await consoleCall('GET', '/console/api/keys')).body as { keys: { keyId: string; status: string }[] };
    expect(keys.keys.find((k) => k.keyId === keyId)).toMatchObject({ status: 'expired', usedByThisSession: false });
  });

  it('about: the server and its CLI package', async () => {
    const about = await api(server.url)('GET', '/console/api/about');
    expect(about.body).toEqual({
      name: 'Coffer',
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      // What scripts/check-node.mjs and the CLI enforce, so the CLI page and the README say the same.
      nodeEngine: (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } })
        .engines.node,
      publicUrl: server.url,
      cli: {
        url: `${server.url}/downloads/coffer-cli.tgz`,
        install: `npm install -g ${server.url}/downloads/coffer-cli.tgz`,
        bytes: expect.any(Number),
        sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
        integrity: expect.stringMatching(/^sha512-/),
      },
    });
  });
});
