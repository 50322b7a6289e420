/**
 * Host accounts end to end on a real server and the real CLI (docs/client.md#hosts-with-their-own-schedule):
 * `coffer admin accounts add-host` makes an account on the owner's plan with a copy of the owner's vault and an
 * append-only key; the host backs up on its own cadence (the owner's cadence does not hold it back); the owner's own
 * key lists, shows and restores the host's backups (`coffer list`, `coffer restore`) with no key per host; a host key,
 * a sibling host's key and an unrelated account's key read nothing of the owner's or each other's; the owner cannot
 * delete a host's backup; a passphrase change on the owner reaches the host account's envelope.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, makeTree, runCli, snapshot } from '../client/helpers.js';

const PASSPHRASE = 'host accounts test passphrase';

// Every step runs the real CLI (a Node process each, Argon2id): generous per-test time on a shared machine.
describe('host accounts: their own schedule, the same vault, read by the owner', { timeout: 180_000 }, () => {
  let server: TestServer;
  let adminEnv: Record<string, string>;
  let work: string;
  let source: string;
  let ownerId: string;
  let ownerKey: string;
  let recipient: string;
  let owner: ReturnType<typeof cliFor>;
  const hosts: { accountId: string; apiKey: string; backupId?: string }[] = [];

  const admin = (args: string[]) => runCli(['admin', ...args], adminEnv);

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    adminEnv = { COFFER_DATA_DIR: server.dataDir };
    ({ accountId: ownerId, apiKey: ownerKey } = await server.newKey({ plan: 'free' }));
    owner = cliFor(server.url, ownerKey, PASSPHRASE);
    work = tempDir('coffer-host-accounts-');
    source = path.join(work, 'source');
    await makeTree(source);
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('refuses a host for an owner without a vault, an unknown owner and a bad label, and changes nothing', async () => {
    const before = json<{ accounts: unknown[] }>(await admin(['accounts', 'list', '--json'])).accounts.length;
    const noVault = await admin(['accounts', 'add-host', ownerId, '--label', 'web']);
    expect(noVault.code).toBe(1);
    expect(noVault.stderr).toMatch(/has no vault yet: its owner runs coffer init first/);
    const unknown = await admin(['accounts', 'add-host', '0190aaaa-0000-7000-8000-000000000000', '--label', 'web']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no account/);
    expect((await owner(['init'])).code).toBe(0);
    ({ recipient } = json(await owner(['recipient', '--json'])));
    const badLabel = await admin(['accounts', 'add-host', ownerId, '--label', "web'; rm -rf /"]);
    expect(badLabel.code).toBe(2);
    expect(badLabel.stderr).not.toMatch(/at .*\.js:\d+/);
    expect(json<{ accounts: unknown[] }>(await admin(['accounts', 'list', '--json'])).accounts.length).toBe(before);
  });

  it('adds two hosts: own accounts on the owner plan, a copy of the vault, append-only write-only keys', async () => {
    for (const label of ['web', 'db']) {
      const made = json(await admin(['accounts', 'add-host', ownerId, '--label', label, '--json']));
      expect(made).toMatchObject({ ownerAccountId: ownerId, label, plan: 'free', scopes: ['backups:write'], appendOnly: true });
      expect(made.accountId).not.toBe(ownerId);
      hosts.push({ accountId: made.accountId, apiKey: made.apiKey });
    }
    const again = await admin(['accounts', 'add-host', ownerId, '--label', 'web']);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already exists/);
    // A host account cannot have hosts of its own.
    const nested = await admin(['accounts', 'add-host', hosts[0]!.accountId, '--label', 'x']);
    expect(nested.code).toBe(1);
    const listed = await api(server.url, ownerKey)('GET', '/api/host-accounts');
    expect(listed.status).toBe(200);
    expect(listed.body.hosts).toEqual([
      expect.objectContaining({ accountId: hosts[0]!.accountId, label: 'web', backupInterval: '1d', vault: 'shared' }),
      expect.objectContaining({ accountId: hosts[1]!.accountId, label: 'db', backupInterval: '1d', vault: 'shared' }),
    ]);
    const text = await admin(['accounts', 'list']);
    expect(text.stdout).toMatch(new RegExp(`^${hosts[0]!.accountId} .* "web" of ${ownerId}$`, 'm'));
  });

  it('each host backs up on its own schedule: the owner and both hosts back up within one free-plan day', async () => {
    expect((await owner(['backup', source])).code).toBe(0);
    for (const host of hosts) {
      const cli = cliFor(server.url, host.apiKey, undefined);
      const made = json<{ id: string; status: string }>(await cli(['backup', source, '--json'], { COFFER_RECIPIENT: recipient }));
      expect(made.status).toBe('READY');
      host.backupId = made.id;
    }
    // The cadence is still per account: a second backup of the same host is refused (exit 3).
    const second = await cliFor(server.url, hosts[0]!.apiKey, undefined)(['backup', source], { COFFER_RECIPIENT: recipient });
    expect(second.code).toBe(3);
  });

  it("the owner's own key lists every host's backups and restores one byte-identical (coffer list, coffer restore)", async () => {
    const listed = json<{ backups: { id: string }[]; hosts: { accountId: string; label: string; backups: { id: string }[] }[] }>(
      await owner(['list', '--json']),
    );
    expect(listed.backups).toHaveLength(1);
    expect(listed.hosts.map((h) => [h.label, h.backups.map((b) => b.id)])).toEqual([
      ['web', [hosts[0]!.backupId]],
      ['db', [hosts[1]!.backupId]],
    ]);
    const text = await owner(['list']);
    expect(text.stdout).toMatch(/host web: account \S+, its own schedule \(every 1d\)/);
    expect(text.stdout).toContain(hosts[1]!.backupId!);
    const target = path.join(work, 'restored-web');
    const restored = await owner(['restore', hosts[0]!.backupId!, target]);
    expect(restored.code, restored.stderr).toBe(0);
    expect(await snapshot(target)).toEqual(await snapshot(source));
    const verified = await owner(['verify', '--all', '--json']);
    expect(json<{ verified: number }>(verified).verified).toBe(3);
  });

  it('nobody else reads: a host key, a sibling host and an unrelated account see nothing of the owner or each other', async () => {
    const { apiKey: strangerKey } = await server.newKey({ plan: 'pro' });
    const stranger = api(server.url, strangerKey);
    const web = api(server.url, hosts[0]!.apiKey);
    const ownerBackup = json<{ backups: { id: string }[] }>(await owner(['list', '--json'])).backups[0]!.id;
    for (const id of [ownerBackup, hosts[0]!.backupId!, hosts[1]!.backupId!]) {
      for (const suffix of ['', '/content', '/events']) {
        expect((await stranger('GET', `/api/backups/${id}${suffix}`)).status).toBe(404);
      }
    }
    // The stranger's full key: no host listing, no host's list.
    expect((await stranger('GET', '/api/host-accounts')).body).toEqual({ hosts: [] });
    for (const host of hosts) expect((await stranger('GET', `/api/host-accounts/${host.accountId}/backups`)).status).toBe(404);
    // A full key of the web host account (an operator made it): still only its own account.
    const webFull = json<{ apiKey: string }>(await admin(['keys', 'create', '--account', hosts[0]!.accountId, '--json'])).apiKey;
    const webOwn = api(server.url, webFull);
    expect((await webOwn('GET', `/api/backups/${hosts[0]!.backupId}`)).status).toBe(200);
    expect((await webOwn('GET', `/api/backups/${hosts[1]!.backupId}`)).status).toBe(404);
    expect((await webOwn('GET', `/api/backups/${ownerBackup}`)).status).toBe(404);
    expect((await webOwn('GET', `/api/backups/${ownerBackup}/content`)).status).toBe(404);
    expect((await webOwn('GET', `/api/host-accounts/${hosts[1]!.accountId}/backups`)).status).toBe(404);
    expect((await webOwn('GET', `/api/host-accounts/${ownerId}/backups`)).status).toBe(404);
    // The host's own append-only key has no read scope at all.
    expect((await web('GET', `/api/backups/${ownerBackup}`)).status).toBe(403);
    // An append-only owner key with read and restore (a host key on the owner's account) reads no host account.
    const appendOnly = json<{ apiKey: string }>(
      await admin(['keys', 'create', '--account', ownerId, '--append-only', '--scopes', 'backups:read,backups:restore', '--json']),
    ).apiKey;
    const ownerHostKey = api(server.url, appendOnly);
    expect((await ownerHostKey('GET', `/api/backups/${hosts[0]!.backupId}`)).status).toBe(404);
    expect((await ownerHostKey('GET', `/api/backups/${hosts[0]!.backupId}/content`)).status).toBe(404);
    expect((await ownerHostKey('GET', '/api/host-accounts')).body).toEqual({ hosts: [] });
    expect((await ownerHostKey('GET', `/api/host-accounts/${hosts[0]!.accountId}/backups`)).status).toBe(404);
    // Malformed ids are 404 too, never 400.
    expect((await api(server.url, ownerKey)('GET', '/api/host-accounts/not-an-id/backups')).status).toBe(404);
  });

  it("the owner reads but never deletes a host's backup", async () => {
    const ownerCall = api(server.url, ownerKey);
    expect((await ownerCall('DELETE', `/api/backups/${hosts[0]!.backupId}`)).status).toBe(404);
    expect((await ownerCall('GET', `/api/backups/${hosts[0]!.backupId}`)).body.status).toBe('READY');
  });

  it("a passphrase change on the owner reaches the host accounts' envelopes; a diverged host is left alone", async () => {
    const webFull = json<{ apiKey: string }>(await admin(['keys', 'create', '--account', hosts[0]!.accountId, '--json'])).apiKey;
    const dbFull = json<{ apiKey: string }>(await admin(['keys', 'create', '--account', hosts[1]!.accountId, '--json'])).apiKey;
    // The db host account's vault is changed on its own: it diverges.
    const dbCli = cliFor(server.url, dbFull, PASSPHRASE);
    expect((await dbCli(['passphrase'], { COFFER_NEW_PASSPHRASE: 'db own passphrase' })).code).toBe(0);
    const changed = await owner(['passphrase'], { COFFER_NEW_PASSPHRASE: 'owner new passphrase' });
    expect(changed.code, changed.stderr).toBe(0);
    const ownerAccount = (await api(server.url, ownerKey)('GET', '/api/backup-account')).body;
    const webAccount = (await api(server.url, webFull)('GET', '/api/backup-account')).body;
    expect(webAccount.wrappedMasterKey).toBe(ownerAccount.wrappedMasterKey);
    expect(webAccount.kdf).toEqual(ownerAccount.kdf);
    const dbAccount = (await api(server.url, dbFull)('GET', '/api/backup-account')).body;
    expect(dbAccount.wrappedMasterKey).not.toBe(ownerAccount.wrappedMasterKey);
    const listed = (await api(server.url, ownerKey)('GET', '/api/host-accounts')).body.hosts;
    expect(listed.map((h: { vault: string }) => h.vault)).toEqual(['shared', 'diverged']);
    // The new passphrase restores the web host's backup from its own account too.
    const target = path.join(work, 'restored-web-new');
    const viaHost = await cliFor(server.url, webFull, 'owner new passphrase')(['restore', hosts[0]!.backupId!, target]);
    expect(viaHost.code, viaHost.stderr).toBe(0);
    expect(fs.existsSync(target)).toBe(true);
  });
});
