/** The real `coffer admin usage` and `coffer admin accounts set-quota` on a real SQLite database (dist/). */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';

const BIN = path.resolve('dist/cli/main.js');
let env: Record<string, string>;

function coffer(args: string[]) {
  const result = spawnSync(process.execPath, [BIN, 'admin', ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

beforeAll(() => {
  env = { COFFER_DATA_DIR: tempDir('coffer-usage-'), COFFER_QUOTA_FREE: '5000' };
});

describe('coffer admin usage and set-quota', () => {
  it('reports per account and totals, follows set-quota, and refuses a bad quota without changing anything', () => {
    const created = JSON.parse(coffer(['accounts', 'create', '--plan', 'free', '--json']).stdout);
    const other = JSON.parse(coffer(['accounts', 'create', '--plan', 'pro', '--json']).stdout);
    let report = JSON.parse(coffer(['usage', '--json']).stdout);
    const row = report.accounts.find((a: { accountId: string }) => a.accountId === created.accountId);
    expect(row).toEqual({
      accountId: created.accountId,
      plan: 'free',
      quotaBytes: 5000,
      quotaSource: 'plan',
      storedBytes: 0,
      backups: 0,
      lastReadyAt: null,
      overdue: false,
      lastDrillAt: null,
      lastDrillResult: null,
      drillStale: false,
      lockedBackups: 0,
      lockedDeletedBackups: 0,
      lockedBytes: 0,
      lockedUntil: null,
      hostAccounts: [],
      fleet: {
        accounts: 1,
        storedBytes: 0,
        backups: 0,
        overdue: 0,
        atQuota: false,
        neverDrilled: 1,
        oldestLastDrillAt: null,
        lockedBackups: 0,
      },
    });
    expect(report.totals).toMatchObject({ accounts: 2, hostAccounts: 0, storedBytes: 0, overdue: 0 });
    expect(report.totals.plans.free.accounts).toBe(1);
    expect(report.totals.plans.pro.accounts).toBe(1);
    // Zero knowledge: nothing but sizes, times and counts.
    expect(Object.keys(row).sort()).toEqual([
      'accountId',
      'backups',
      'drillStale',
      'fleet',
      'hostAccounts',
      'lastDrillAt',
      'lastDrillResult',
      'lastReadyAt',
      'lockedBackups',
      'lockedBytes',
      'lockedDeletedBackups',
      'lockedUntil',
      'overdue',
      'plan',
      'quotaBytes',
      'quotaSource',
      'storedBytes',
    ]);

    const bad = coffer(['accounts', 'set-quota', created.accountId, '12kb']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/quota must be a whole number of bytes, none or plan/);
    expect(bad.stderr).not.toMatch(/\n\s+at /);

    expect(JSON.parse(coffer(['accounts', 'set-quota', created.accountId, '123', '--json']).stdout)).toEqual({
      accountId: created.accountId,
      quotaBytes: 123,
      quotaSource: 'account',
    });
    expect(coffer(['accounts', 'set-quota', other.accountId, 'none']).stdout).toMatch(/no storage quota/);
    report = JSON.parse(coffer(['usage', '--json']).stdout);
    expect(report.accounts.map((a: { quotaBytes: number | null }) => a.quotaBytes)).toEqual([123, null]);
    expect(coffer(['accounts', 'set-quota', created.accountId, 'plan']).stdout).toMatch(
      /storage quota 4.9 KiB \(5000 bytes\) \(its plan's\)/,
    );

    const text = coffer(['usage']).stdout;
    expect(text).toMatch(/ACCOUNT\s+PLAN\s+STORED\s+QUOTA\s+BACKUPS\s+LAST READY\s+OVERDUE\s+LAST DRILL\s+LOCKED/);
    expect(text).toMatch(/total: 2 accounts, 0 B stored, 0 backups, 0 overdue/);
    const quotaEntries = () =>
      JSON.parse(coffer(['audit', created.accountId, '--json']).stdout).events.filter(
        (entry: { action: string }) => entry.action === 'account.quota',
      );
    expect(quotaEntries().map((entry: { detail: string }) => entry.detail)).toEqual(['123 bytes → plan', 'plan → 123 bytes']);
    // Setting the quota it already has changes nothing, so nothing is recorded.
    expect(coffer(['accounts', 'set-quota', created.accountId, 'plan']).code).toBe(0);
    expect(quotaEntries()).toHaveLength(2);
  }, 240_000);
});
