/**
 * What the operator sees of a fleet (docs/operations.md#fleets): the real `coffer admin usage` (text and --json) lists an
 * owner's host accounts under it with the fleet's total against the owner's quota, and /metrics counts host accounts
 * and the fleets at their quota. A real server (SQLite) holds the accounts; its host accounts are made with the real
 * `coffer admin accounts add-host` and store through their own append-only keys.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertBuilt, json, runCli } from '../client/helpers.js';

const METRICS_TOKEN = 'fleet-metrics-token-0123456789';

interface Row {
  accountId: string;
  plan: string;
  quotaBytes: number | null;
  quotaSource: string;
  storedBytes: number;
  backups: number;
  hostLabel?: string | null;
  hostAccounts: Row[];
  fleet: Record<string, unknown>;
}

describe('coffer admin usage and /metrics: host accounts under their owner, with the fleet total', { timeout: 180_000 }, () => {
  let server: TestServer;
  let ownerId: string;
  let loneId: string;
  const hosts: { accountId: string; apiKey: string }[] = [];
  const admin = (args: string[]) => runCli(['admin', ...args], { COFFER_DATA_DIR: server.dataDir });

  /** create → upload → finalize with `apiKey`. */
  const store = async (apiKey: string, size: number) => {
    const call = api(server.url, apiKey);
    const id = (await call('POST', '/api/backups')).body.backupId as string;
    const uploaded = await call('POST', `/api/backups/upload?backupId=${id}`, {
      body: new Uint8Array(size),
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(uploaded.status).toBe(201);
    expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(size) })).status).toBe(200);
  };

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer({ env: { COFFER_METRICS_TOKEN: METRICS_TOKEN } });
    const owner = await server.newKey({ plan: 'pro' });
    ownerId = owner.accountId;
    loneId = (await server.newKey({ plan: 'free' })).accountId;
    expect((await api(server.url, owner.apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    for (const label of ['web', 'db']) {
      const made = json(await admin(['accounts', 'add-host', ownerId, '--label', label, '--json']));
      hosts.push({ accountId: made.accountId, apiKey: made.apiKey });
    }
    await store(owner.apiKey, 1000);
    await store(hosts[0]!.apiKey, 300);
    await store(hosts[1]!.apiKey, 200);
    expect((await admin(['accounts', 'set-quota', ownerId, '2000'])).code).toBe(0);
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
  });

  it('--json: each owner with its host accounts and the fleet total; host accounts are not listed on their own', async () => {
    const report = json<{ accounts: Row[]; totals: Record<string, any> }>(await admin(['usage', '--json']));
    expect(report.accounts.map((a) => a.accountId)).toEqual([ownerId, loneId]);
    const owner = report.accounts[0]!;
    expect(owner).toMatchObject({ plan: 'pro', quotaBytes: 2000, quotaSource: 'account', storedBytes: 1000, backups: 1 });
    expect(owner.hostAccounts).toEqual([
      expect.objectContaining({
        accountId: hosts[0]!.accountId,
        hostLabel: 'web',
        plan: 'pro',
        storedBytes: 300,
        quotaBytes: 2000,
        quotaSource: 'owner',
      }),
      expect.objectContaining({
        accountId: hosts[1]!.accountId,
        hostLabel: 'db',
        plan: 'pro',
        storedBytes: 200,
        quotaBytes: 2000,
        quotaSource: 'owner',
      }),
    ]);
    expect(owner.fleet).toEqual({
      accounts: 3,
      storedBytes: 1500,
      backups: 3,
      overdue: 0,
      atQuota: false,
      neverDrilled: 3,
      oldestLastDrillAt: null,
      lockedBackups: 0,
    });
    expect(report.accounts[1]).toMatchObject({ hostAccounts: [], fleet: { accounts: 1, storedBytes: 0, atQuota: false } });
    expect(report.totals).toMatchObject({ accounts: 4, hostAccounts: 2, storedBytes: 1500, backups: 3, atQuota: 0 });
    expect(report.totals.plans.pro).toMatchObject({ accounts: 3, hostAccounts: 2, storedBytes: 1500 });
  });

  it('text: the host accounts under their owner, then the fleet total against the quota; AT QUOTA once it is reached', async () => {
    const text = (await admin(['usage'])).stdout;
    const lines = text.split('\n');
    const at = lines.findIndex((line) => line.startsWith(ownerId));
    expect(lines[at]).toMatch(new RegExp(`^${ownerId}\\s+pro\\s+1000 B\\s+2\\.0 KiB\\s+1\\s`));
    expect(lines[at + 1]).toMatch(new RegExp(`^  host web ${hosts[0]!.accountId}\\s+pro\\s+300 B\\s+owner's\\s+1\\s`));
    expect(lines[at + 2]).toMatch(new RegExp(`^  host db ${hosts[1]!.accountId}\\s+pro\\s+200 B\\s+owner's\\s+1\\s`));
    expect(lines[at]).toMatch(/\snever\s+-$/);
    expect(lines[at + 3]).toMatch(/^ {2}fleet total \(3 accounts\)\s+-\s+1\.5 KiB\s+2\.0 KiB\s+3\s+-\s+-\s+-\s+-$/);
    expect(text).toMatch(/total: 4 accounts \(2 host accounts\), 1\.5 KiB stored, 3 backups, 0 overdue/);
    expect(text).toMatch(/ {2}pro: 3 accounts \(2 host accounts\), 1\.5 KiB stored/);

    expect((await admin(['accounts', 'set-quota', ownerId, '1500'])).code).toBe(0);
    const full = (await admin(['usage'])).stdout.split('\n');
    expect(full.find((line) => line.startsWith('  fleet total'))).toMatch(/1\.5 KiB\s+1\.5 KiB\s+3\s+-\s+-\s+-\s+-\s+AT QUOTA$/);
    expect((await admin(['accounts', 'set-quota', ownerId, '2000'])).code).toBe(0);
  });

  it('/metrics counts host accounts on their owner plan and the fleets at their quota', async () => {
    const scrape = async () => (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    let metrics = await scrape();
    expect(metrics).toMatch(/^coffer_accounts\{plan="pro"\} 3$/m);
    expect(metrics).toMatch(/^coffer_host_accounts\{plan="pro"\} 2$/m);
    expect(metrics).toMatch(/^coffer_host_accounts\{plan="free"\} 0$/m);
    expect(metrics).toMatch(/^coffer_fleets_at_quota\{plan="pro"\} 0$/m);
    expect((await admin(['accounts', 'set-quota', ownerId, '1500'])).code).toBe(0);
    metrics = await scrape();
    expect(metrics).toMatch(/^coffer_fleets_at_quota\{plan="pro"\} 1$/m);
  });
});
