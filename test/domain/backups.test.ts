/** The backup lifecycle rules of src/domain/backups.ts, called directly: pure functions, no server. */
import { describe, expect, it } from 'vitest';
import {
  BACKUP_STATUSES,
  type BackupStatus,
  type CreateSnapshot,
  decideCreate,
  isFreshSignIn,
  isDeletionGrace,
  isRestorable,
  isTerminal,
  purgeAfterFor,
  vaultHistoryExpiresAt,
  isVisible,
  retentionExpiresAt,
  secondsUntil,
  slotExpiresAt,
  sweepActionFor,
  type SweepAction,
} from '../../src/domain/backups.js';
import type { Plan } from '../../src/domain/plans.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const NOW = Date.UTC(2026, 0, 15, 12, 0, 0);

const ready: CreateSnapshot = { plan: 'free', vaultInitialized: true, inFlightBackupId: null, lastReadyCreatedAt: null };

describe('decideCreate', () => {
  it('refuses in the order vault, slot in flight, cadence: the first failing check names the refusal', () => {
    const everythingWrong: CreateSnapshot = {
      plan: 'free',
      vaultInitialized: false,
      inFlightBackupId: 'b-in-flight',
      lastReadyCreatedAt: NOW - HOUR,
    };
    const cases: [string, CreateSnapshot, ReturnType<typeof decideCreate>][] = [
      ['all three fail', everythingWrong, { allowed: false, reason: 'vault_not_initialized' }],
      [
        'vault ok, slot in flight and cadence fail',
        { ...everythingWrong, vaultInitialized: true },
        { allowed: false, reason: 'upload_in_progress', backupId: 'b-in-flight' },
      ],
      [
        'only cadence fails',
        { ...everythingWrong, vaultInitialized: true, inFlightBackupId: null },
        { allowed: false, reason: 'backup_cadence_exceeded', nextAllowedAt: NOW - HOUR + DAY },
      ],
      [
        'nothing fails',
        { ...everythingWrong, vaultInitialized: true, inFlightBackupId: null, lastReadyCreatedAt: NOW - DAY },
        { allowed: true },
      ],
      ['no backup ever reached READY', ready, { allowed: true }],
    ];
    for (const [name, snapshot, decision] of cases) expect(decideCreate(snapshot, NOW), name).toEqual(decision);
  });

  it("cadence: the plan's interval after the newest READY backup's createdAt, allowed from that instant on", () => {
    const cases: [Plan, number][] = [
      ['free', DAY],
      ['plus', 4 * HOUR],
      ['pro', 30 * MIN],
    ];
    for (const [plan, interval] of cases) {
      const last = NOW - interval;
      const at = (now: number) => decideCreate({ ...ready, plan, lastReadyCreatedAt: last }, now);
      expect(at(NOW - 1), plan).toEqual({ allowed: false, reason: 'backup_cadence_exceeded', nextAllowedAt: NOW });
      expect(at(NOW), plan).toEqual({ allowed: true });
      expect(at(NOW + 1), plan).toEqual({ allowed: true });
    }
  });
});

describe('time arithmetic', () => {
  it('secondsUntil rounds up to whole seconds and never goes below 0 (Retry-After)', () => {
    const cases: [number, number][] = [
      [NOW + 1, 1],
      [NOW + 999, 1],
      [NOW + 1000, 1],
      [NOW + 1001, 2],
      [NOW + DAY, 86_400],
      [NOW, 0],
      [NOW - 5000, 0],
    ];
    for (const [at, seconds] of cases) expect(secondsUntil(at, NOW), `${at - NOW} ms`).toBe(seconds);
  });

  it('an upload slot expires one upload window after it was created', () => {
    expect(slotExpiresAt(NOW, HOUR)).toBe(NOW + HOUR);
    expect(slotExpiresAt(NOW, 5 * MIN)).toBe(NOW + 5 * MIN);
  });

  it("a READY backup is kept for its plan's retention after it was finalized: 7, 30 and 90 days", () => {
    const cases: [Plan, number][] = [
      ['free', 7 * DAY],
      ['plus', 30 * DAY],
      ['pro', 90 * DAY],
    ];
    for (const [plan, retention] of cases) expect(retentionExpiresAt(NOW, plan), plan).toBe(NOW + retention);
  });
});

describe('statuses', () => {
  it('terminal: READY, FAILED, DELETED; visible: all but DELETING and DELETED', () => {
    expect(BACKUP_STATUSES.filter(isTerminal)).toEqual(['READY', 'FAILED', 'DELETED']);
    expect(BACKUP_STATUSES.filter(isVisible)).toEqual(['PENDING_UPLOAD', 'UPLOADED', 'READY', 'FAILED']);
  });
});

describe('sweepActionFor', () => {
  it('what the sweeper does with each status, before, at and after the record expires', () => {
    // [status, expiresAt relative to now → action]: `expiresAt <= now` is expired.
    const table: [BackupStatus, { before: SweepAction; at: SweepAction; after: SweepAction }][] = [
      ['PENDING_UPLOAD', { before: null, at: 'fail', after: 'fail' }],
      ['UPLOADED', { before: null, at: 'fail', after: 'fail' }],
      ['READY', { before: null, at: 'prune', after: 'prune' }],
      ['FAILED', { before: 'prune', at: 'prune', after: 'prune' }],
      ['DELETING', { before: 'finish-delete', at: 'finish-delete', after: 'finish-delete' }],
      ['DELETED', { before: null, at: null, after: null }],
    ];
    expect(table.map(([status]) => status)).toEqual([...BACKUP_STATUSES]);
    for (const [status, expected] of table) {
      const actual = {
        before: sweepActionFor(status, NOW + 1, NOW),
        at: sweepActionFor(status, NOW, NOW),
        after: sweepActionFor(status, NOW - 1, NOW),
      };
      expect(actual, status).toEqual(expected);
    }
  });
});

describe('deletion grace', () => {
  it('a delete of a READY backup waits for the grace, never past the plan retention; anything else goes at once', () => {
    const ready = { status: 'READY' as BackupStatus, expiresAt: NOW + 30 * DAY };
    expect(purgeAfterFor(ready, 0, NOW)).toBeNull();
    expect(purgeAfterFor(ready, 7, NOW)).toBe(NOW + 7 * DAY);
    expect(purgeAfterFor({ ...ready, expiresAt: NOW + 2 * DAY }, 7, NOW)).toBe(NOW + 2 * DAY);
    expect(purgeAfterFor({ ...ready, expiresAt: NOW }, 7, NOW)).toBeNull();
    for (const status of ['PENDING_UPLOAD', 'UPLOADED', 'FAILED'] as BackupStatus[]) {
      expect(purgeAfterFor({ ...ready, status }, 7, NOW), status).toBeNull();
    }
  });

  it('the sweeper leaves a scheduled delete alone until its purgeAfter; restorable only until then', () => {
    expect(sweepActionFor('DELETING', NOW + DAY, NOW, NOW + 1)).toBeNull();
    expect(sweepActionFor('DELETING', NOW + DAY, NOW, NOW)).toBe('finish-delete');
    expect(sweepActionFor('DELETING', NOW + DAY, NOW, null)).toBe('finish-delete');
    expect(isRestorable({ status: 'DELETING', purgeAfter: NOW + 1 }, NOW)).toBe(true);
    expect(isRestorable({ status: 'DELETING', purgeAfter: NOW }, NOW)).toBe(false);
    expect(isRestorable({ status: 'DELETING', purgeAfter: null }, NOW)).toBe(false);
    expect(isRestorable({ status: 'DELETED', purgeAfter: NOW + 1 }, NOW)).toBe(false);
  });

  it('grace values, vault history expiry and fresh sign-ins', () => {
    expect([0, 1, 90].every(isDeletionGrace)).toBe(true);
    expect([-1, 91, 1.5, NaN, '7'].some(isDeletionGrace)).toBe(false);
    expect(vaultHistoryExpiresAt(0, NOW)).toBeNull();
    expect(vaultHistoryExpiresAt(7, NOW)).toBe(NOW + 7 * DAY);
    expect(isFreshSignIn(NOW - 5 * MIN, NOW)).toBe(true);
    expect(isFreshSignIn(NOW - 5 * MIN - 1, NOW)).toBe(false);
    expect(isFreshSignIn(NOW + 1, NOW)).toBe(false);
  });
});
