/**
 * The operator's view of restore drills and locked backups (docs/operations.md#restore-drills) on SQLite and
 * PostgreSQL: the real `coffer admin usage` (text and --json), the real `coffer admin backups locked`, and /metrics of a
 * real server. Accounts, READY backups and the drills' attestations go through the API (the server's clock set back to
 * record old drills); arranged in the database, as data only: the backups' locked_until (S3 Object Lock, which neither
 * s3rver nor the fs store can give).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { lockUntil, onDatabase } from '../helpers/arrange-db.js';
import { recordDrill } from '../helpers/drills.js';
import { readyBackup, useServer, type Call } from '../helpers/fixture.js';
import { ManualClock } from '../helpers/clock.js';
import { skipPg } from '../helpers/pg.js';
import { assertBuilt, json, runCli } from '../client/helpers.js';

const METRICS_TOKEN = 'drill-metrics-token-0123456789';
const DAY = 24 * 3_600_000;
/** In an attestation's payload: it must never reach the operator. */
const CANARY = 'drill-canary-machine-7f31';

interface Row {
  accountId: string;
  lastDrillAt: string | null;
  lastDrillResult: string | null;
  drillStale: boolean;
  lockedBackups: number;
  lockedDeletedBackups: number;
  lockedBytes: number;
  lockedUntil: string | null;
}

function drillsAndLocks(engine: 'SQLite' | 'PostgreSQL') {
  // The server's clock starts 21 days back: the backups (the pro plan's cadence between them) and the old drills are
  // made then; it catches up with the real one for the recent drill and what the tests read.
  const clock = new ManualClock(Date.now() - 21 * DAY);
  const fx = useServer({ clock, postgres: engine === 'PostgreSQL', env: { COFFER_METRICS_TOKEN: METRICS_TOKEN } });
  const ids = { drilled: '', stale: '', never: '' };
  const backups = { kept: '', expired: '', deleted: '', stale: '' };
  const calls: Record<'drilled' | 'stale', Call> = {} as never;
  const until = { kept: Date.now() + 100 * DAY, deleted: Date.now() + 200 * DAY };

  const admin = (args: string[]) => {
    const url = fx.server.parts.config.databaseUrl;
    return runCli(['admin', ...args], { COFFER_DATA_DIR: fx.server.dataDir, ...(url === null ? {} : { COFFER_DATABASE_URL: url }) });
  };
  const scrape = async () => (await fetch(`${fx.server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const gauge = (metrics: string, name: string, plan: string) =>
    Number(new RegExp(`^${name}\\{plan="${plan}"\\} (\\d+)$`, 'm').exec(metrics)?.[1]);

  beforeAll(async () => {
    assertBuilt();
    const drilled = await fx.account({ plan: 'pro' });
    const stale = await fx.account({ plan: 'free' });
    const never = await fx.account({ plan: 'free' });
    Object.assign(ids, { drilled: drilled.accountId, stale: stale.accountId, never: never.accountId });
    Object.assign(calls, { drilled: drilled.call, stale: stale.call });
    for (const [name, size] of [
      ['kept', 1000],
      ['expired', 2000],
      ['deleted', 3000],
    ] as const) {
      backups[name] = (await readyBackup(drilled.call, size, size)).id;
      clock.advance(31 * 60_000);
    }
    expect((await drilled.call('DELETE', `/api/backups/${backups.deleted}`)).status).toBe(200);
    backups.stale = (await readyBackup(stale.call, 500, 4)).id;
  }, 120_000);

  it('/metrics: the drill and lock gauges move when attestations are recorded and objects locked', async () => {
    let metrics = await scrape();
    for (const name of ['coffer_drill_accounts', 'coffer_drill_stale_accounts', 'coffer_drill_failed_accounts', 'coffer_locked_backups']) {
      for (const plan of ['free', 'plus', 'pro']) expect(gauge(metrics, name, plan), `${name} ${plan}`).toBe(0);
    }
    // About 21 days ago: the drilled account's first drill (passed) and the stale account's only one
    // (COFFER_DRILL_MAX_AGE: 14d by default).
    await recordDrill(calls.drilled, { id: backups.kept, accountId: ids.drilled }, 'passed', CANARY);
    await recordDrill(calls.stale, { id: backups.stale, accountId: ids.stale }, 'passed', CANARY);
    // Three days and an hour ago: the drilled account's newest drill reported a failure (the newest counts).
    clock.advance(Date.now() - 3 * DAY - 3_600_000 - clock.now());
    await recordDrill(calls.drilled, { id: backups.expired, accountId: ids.drilled }, 'failed', CANARY);
    clock.advance(Math.max(0, Date.now() - clock.now()));
    await onDatabase(fx.server, [
      lockUntil(backups.kept, until.kept),
      lockUntil(backups.expired, Date.now() - DAY),
      lockUntil(backups.deleted, until.deleted),
    ]);
    metrics = await scrape();
    expect(gauge(metrics, 'coffer_drill_accounts', 'pro')).toBe(1);
    expect(gauge(metrics, 'coffer_drill_accounts', 'free')).toBe(1);
    expect(gauge(metrics, 'coffer_drill_stale_accounts', 'free')).toBe(1);
    expect(gauge(metrics, 'coffer_drill_stale_accounts', 'pro')).toBe(0);
    expect(gauge(metrics, 'coffer_drill_failed_accounts', 'pro')).toBe(1);
    expect(gauge(metrics, 'coffer_drill_failed_accounts', 'free')).toBe(0);
    // The kept backup and the DELETED record still locked; the lock that has run out does not count.
    expect(gauge(metrics, 'coffer_locked_backups', 'pro')).toBe(2);
    expect(gauge(metrics, 'coffer_locked_bytes', 'pro')).toBe(4000);
    expect(metrics).not.toContain(CANARY);
  });

  it('coffer admin usage --json: each account its newest drill, its locks; the totals; nothing of a payload', async () => {
    const result = await admin(['usage', '--json']);
    expect(result.stdout).not.toContain(CANARY);
    const report = json<{ accounts: (Row & { fleet: Record<string, unknown> })[]; totals: Record<string, any>; drillMaxAgeMs: number }>(
      result,
    );
    expect(report.drillMaxAgeMs).toBe(14 * DAY);
    const row = (id: string) => report.accounts.find((a) => a.accountId === id)!;
    const drilled = row(ids.drilled);
    expect(drilled).toMatchObject({
      lastDrillResult: 'failed',
      drillStale: false,
      lockedBackups: 1,
      lockedDeletedBackups: 1,
      lockedBytes: 4000,
      lockedUntil: new Date(until.deleted).toISOString(),
    });
    expect(Date.now() - Date.parse(drilled.lastDrillAt!)).toBeGreaterThanOrEqual(3 * DAY);
    expect(Date.now() - Date.parse(drilled.lastDrillAt!)).toBeLessThan(4 * DAY);
    expect(row(ids.stale)).toMatchObject({ lastDrillResult: 'passed', drillStale: true, lockedBackups: 0, lockedUntil: null });
    expect(row(ids.never)).toMatchObject({ lastDrillAt: null, lastDrillResult: null, drillStale: false, lockedBackups: 0 });
    expect(row(ids.never).fleet).toMatchObject({ neverDrilled: 1, oldestLastDrillAt: null, lockedBackups: 0 });
    expect(row(ids.stale).fleet).toMatchObject({ neverDrilled: 0, oldestLastDrillAt: row(ids.stale).lastDrillAt });
    expect(report.totals).toMatchObject({
      drilledAccounts: 2,
      staleDrillAccounts: 1,
      failedDrillAccounts: 1,
      lockedBackups: 1,
      lockedDeletedBackups: 1,
      lockedBytes: 4000,
    });
    expect(report.totals.plans.free).toMatchObject({ drilledAccounts: 1, staleDrillAccounts: 1, failedDrillAccounts: 0 });
  });

  it('coffer admin usage: LAST DRILL (age, FAILED, STALE, never) and LOCKED (count and latest date)', async () => {
    const text = (await admin(['usage'])).stdout;
    expect(text).not.toContain(CANARY);
    expect(text).toMatch(/ACCOUNT\s+PLAN\s+STORED\s+QUOTA\s+BACKUPS\s+LAST READY\s+OVERDUE\s+LAST DRILL\s+LOCKED/);
    const line = (id: string) => text.split('\n').find((l) => l.startsWith(id))!;
    const lockedDate = new Date(until.deleted).toISOString().slice(0, 10);
    expect(line(ids.drilled)).toMatch(new RegExp(`\\s3d ago FAILED\\s+1 \\(\\+1 deleted\\) until ${lockedDate}$`));
    expect(line(ids.stale)).toMatch(/\s20d ago STALE\s+-$/);
    expect(line(ids.never)).toMatch(/\snever\s+-$/);
    expect(text).toMatch(/total: 3 accounts, .* \d+ overdue, 2 drilled \(1 stale, 1 failed\), 2 locked/);
  });

  it('coffer admin backups locked: every locked backup with its status and date, DELETED records included', async () => {
    const listed = json<{
      backups: { backupId: string; accountId: string; status: string; ciphertextSizeBytes: number; lockedUntil: string }[];
    }>(await admin(['backups', 'locked', '--json']));
    expect(listed.backups).toEqual([
      {
        backupId: backups.deleted,
        accountId: ids.drilled,
        status: 'DELETED',
        ciphertextSizeBytes: 3000,
        lockedUntil: new Date(until.deleted).toISOString(),
      },
      {
        backupId: backups.kept,
        accountId: ids.drilled,
        status: 'READY',
        ciphertextSizeBytes: 1000,
        lockedUntil: new Date(until.kept).toISOString(),
      },
    ]);
    const text = (await admin(['backups', 'locked', '--account', ids.drilled])).stdout;
    expect(text).toMatch(/^BACKUP\s+ACCOUNT\s+STATUS\s+SIZE\s+LOCKED UNTIL$/m);
    expect(text).toMatch(
      new RegExp(`^${backups.kept}\\s+${ids.drilled}\\s+READY\\s+1000 B\\s+${new Date(until.kept).toISOString()}$`, 'm'),
    );
    expect((await admin(['backups', 'locked', '--account', ids.stale])).stdout).toBe(`no backup of account ${ids.stale} is locked\n`);
  });
}

describe('drills and locks as the operator sees them (SQLite)', { timeout: 180_000 }, () => drillsAndLocks('SQLite'));
describe.skipIf(skipPg)('drills and locks as the operator sees them (PostgreSQL)', { timeout: 180_000 }, () =>
  drillsAndLocks('PostgreSQL'),
);
