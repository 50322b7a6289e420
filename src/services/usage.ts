/**
 * Usage per account and in total (docs/operations.md#usage): what `coffer admin usage`, /metrics and the operator
 * console show. An owner's host accounts are listed under it with the fleet's total: the owner's quota covers them all
 * (docs/operations.md#fleets). Sizes, times and counts only: never a file name, metadata or key material (the store's
 * usage rows hold none).
 */
import { PLANS, type Plan } from '../domain/plans.js';
import { atQuota, effectiveQuota, isOverdue, type PlanQuotas } from '../domain/quotas.js';
import { DEFAULT_DRILL_MAX_AGE_MS, isDrillStale } from '../domain/drills.js';
import { iso, isoOrNull } from '../domain/time.js';
import type { AccountSafetyRow, AccountUsageRow, DrillResult, UsageStore } from '../store/ports/usage.js';

export interface AccountUsage {
  accountId: string;
  plan: Plan;
  /**
   * The quota that applies (bytes; null: none) and where it comes from: the plan's setting, the account's own, or (a
   * host account) its owner's, which the whole fleet shares.
   */
  quotaBytes: number | null;
  quotaSource: 'plan' | 'account' | 'owner';
  /** Ciphertext of READY and UPLOADED backups, of backups in their deletion grace, and bytes reserved by uploads. */
  storedBytes: number;
  /** READY backups. */
  backups: number;
  /** When the newest READY backup was created (null: never). */
  lastReadyAt: string | null;
  /** No READY backup for more than twice the plan interval (counted from the account's creation if never). */
  overdue: boolean;
  /** When the server recorded the account's newest restore drill (null: never drilled). */
  lastDrillAt: string | null;
  /** What that drill reported, as its client claimed (the server cannot check an attestation); null: never drilled. */
  lastDrillResult: DrillResult | null;
  /** Drilled, but the newest drill is older than COFFER_DRILL_MAX_AGE. */
  drillStale: boolean;
  /** Backups (not DELETED) whose object the store keeps locked (S3 Object Lock). */
  lockedBackups: number;
  /** DELETED records whose object is still locked: it stays in the bucket until its retain-until date. */
  lockedDeletedBackups: number;
  /** Ciphertext bytes of the locked objects, DELETED records included. */
  lockedBytes: number;
  /** The latest retain-until date of the locked objects (null: none). */
  lockedUntil: string | null;
}

/** An account's drill and lock facts alone (the operator console adds them to its own rows). */
export type AccountSafety = Pick<
  AccountUsage,
  'lastDrillAt' | 'lastDrillResult' | 'drillStale' | 'lockedBackups' | 'lockedDeletedBackups' | 'lockedBytes' | 'lockedUntil'
>;

/** A backup whose object is locked: ids, status, size and until when; never its metadata. */
export interface LockedBackup {
  backupId: string;
  accountId: string;
  status: string;
  ciphertextSizeBytes: number | null;
  lockedUntil: string;
}

/** A host account under its owner: its own numbers, and the name its owner gave it. */
export interface HostAccountUsage extends AccountUsage {
  hostLabel: string | null;
}

/** An owner and its host accounts together: what counts against the owner's quota. */
export interface FleetTotal {
  /** The owner and its host accounts (1: an account without host accounts). */
  accounts: number;
  storedBytes: number;
  backups: number;
  overdue: number;
  /** The fleet stores at or over the owner's quota: no new backup, upload or host account. */
  atQuota: boolean;
  /** Of the fleet's accounts, those never drilled. */
  neverDrilled: number;
  /** The oldest of the drilled accounts' newest drills (null: none drilled). */
  oldestLastDrillAt: string | null;
  /** Locked backups (not DELETED) of the whole fleet. */
  lockedBackups: number;
}

/** An owner (or an ordinary account), its host accounts (oldest first) and their total. */
export interface OwnerUsage extends AccountUsage {
  hostAccounts: HostAccountUsage[];
  fleet: FleetTotal;
}

export interface PlanTotals {
  /** Accounts, host accounts included. */
  accounts: number;
  /** Of those, host accounts (on their owner's plan). */
  hostAccounts: number;
  storedBytes: number;
  backups: number;
  overdue: number;
  /** Owners whose fleet stores at or over its quota. */
  atQuota: number;
  /** Accounts with at least one restore drill recorded. */
  drilledAccounts: number;
  /** Of those, accounts whose newest drill is older than COFFER_DRILL_MAX_AGE. */
  staleDrillAccounts: number;
  /** Of those, accounts whose newest drill reported failed. */
  failedDrillAccounts: number;
  /** Locked backups (not DELETED), DELETED records still locked, and the bytes of both. */
  lockedBackups: number;
  lockedDeletedBackups: number;
  lockedBytes: number;
}

export interface UsageTotals extends PlanTotals {
  /** Per plan, every plan present (zeros included). */
  plans: Record<Plan, PlanTotals>;
}

export interface UsageReport {
  at: string;
  /** COFFER_DRILL_MAX_AGE: a drilled account whose newest drill is older is stale. */
  drillMaxAgeMs: number;
  /** Owners and ordinary accounts, oldest first, each with its host accounts. */
  accounts: OwnerUsage[];
  totals: UsageTotals;
}

const NO_SAFETY_ROW: Omit<AccountSafetyRow, 'accountId'> = {
  lastDrillAt: null,
  lastDrillResult: null,
  lockedBackups: 0,
  lockedDeletedBackups: 0,
  lockedBytes: 0,
  lockedUntil: null,
};

export function accountSafety(row: Omit<AccountSafetyRow, 'accountId'>, now: number, drillMaxAgeMs: number): AccountSafety {
  return {
    lastDrillAt: isoOrNull(row.lastDrillAt),
    lastDrillResult: row.lastDrillResult,
    drillStale: isDrillStale(row.lastDrillAt, now, drillMaxAgeMs),
    lockedBackups: row.lockedBackups,
    lockedDeletedBackups: row.lockedDeletedBackups,
    lockedBytes: row.lockedBytes,
    lockedUntil: isoOrNull(row.lockedUntil),
  };
}

/** Every account's (or one's) drill and lock facts, by account id. */
export async function safetyByAccount(
  store: UsageStore,
  now: number,
  drillMaxAgeMs: number,
  accountId?: string,
): Promise<Map<string, AccountSafety>> {
  const rows = await store.safety(now, accountId);
  return new Map(rows.map((row) => [row.accountId, accountSafety(row, now, drillMaxAgeMs)]));
}

/** The backups (DELETED records included) whose object is locked at `now`, latest retain-until first. */
export async function lockedBackups(store: UsageStore, now: number, accountId?: string): Promise<LockedBackup[]> {
  return (await store.lockedBackups(now, accountId)).map((row) => ({ ...row, lockedUntil: iso(row.lockedUntil) }));
}

export function accountUsage(
  row: AccountUsageRow,
  now: number,
  planQuotas: PlanQuotas,
  safety: AccountSafety = accountSafety(NO_SAFETY_ROW, now, DEFAULT_DRILL_MAX_AGE_MS),
): AccountUsage {
  return {
    accountId: row.accountId,
    plan: row.plan,
    quotaBytes: effectiveQuota(row.plan, row.quotaOverride, planQuotas),
    quotaSource: row.quotaOverride === undefined ? 'plan' : 'account',
    storedBytes: row.storedBytes,
    backups: row.backups,
    lastReadyAt: row.lastReadyAt === null ? null : iso(row.lastReadyAt),
    overdue: isOverdue(row.plan, row.lastReadyAt, row.createdAt, now),
    ...safety,
  };
}

/**
 * The store's rows grouped by fleet: each owner (or ordinary account) with its host accounts, in the rows' order. A host
 * account whose owner is not among the rows stands alone.
 */
export function fleets<R extends Pick<AccountUsageRow, 'accountId' | 'ownerAccountId'>>(rows: readonly R[]): { owner: R; hosts: R[] }[] {
  const ids = new Set(rows.map((row) => row.accountId));
  const groups = new Map<string, { owner: R; hosts: R[] }>();
  for (const row of rows)
    if (row.ownerAccountId === null || !ids.has(row.ownerAccountId)) groups.set(row.accountId, { owner: row, hosts: [] });
  for (const row of rows) if (row.ownerAccountId !== null && ids.has(row.ownerAccountId)) groups.get(row.ownerAccountId)?.hosts.push(row);
  return [...groups.values()];
}

const zero = (): PlanTotals => ({
  accounts: 0,
  hostAccounts: 0,
  storedBytes: 0,
  backups: 0,
  overdue: 0,
  atQuota: 0,
  drilledAccounts: 0,
  staleDrillAccounts: 0,
  failedDrillAccounts: 0,
  lockedBackups: 0,
  lockedDeletedBackups: 0,
  lockedBytes: 0,
});

const sumOf = (members: readonly AccountUsage[], pick: (account: AccountUsage) => number | boolean) =>
  members.reduce((sum, account) => sum + Number(pick(account)), 0);

/** The fleet's drill and lock facts: how many never drilled, the oldest newest drill, its locked backups. */
function fleetSafety(members: readonly AccountUsage[]): Pick<FleetTotal, 'neverDrilled' | 'oldestLastDrillAt' | 'lockedBackups'> {
  const drilled = members.flatMap((account) => (account.lastDrillAt === null ? [] : [account.lastDrillAt])).sort();
  return {
    neverDrilled: members.length - drilled.length,
    oldestLastDrillAt: drilled[0] ?? null,
    lockedBackups: sumOf(members, (a) => a.lockedBackups),
  };
}

/** Adds a fleet's drill and lock counts to a total. */
function addSafety(sum: PlanTotals, members: readonly AccountUsage[]): void {
  sum.drilledAccounts += sumOf(members, (a) => a.lastDrillAt !== null);
  sum.staleDrillAccounts += sumOf(members, (a) => a.drillStale);
  sum.failedDrillAccounts += sumOf(members, (a) => a.lastDrillResult === 'failed');
  sum.lockedBackups += sumOf(members, (a) => a.lockedBackups);
  sum.lockedDeletedBackups += sumOf(members, (a) => a.lockedDeletedBackups);
  sum.lockedBytes += sumOf(members, (a) => a.lockedBytes);
}

/**
 * Every account's usage at `now` (owners oldest first, each with its host accounts) and the totals; a drilled account
 * whose newest drill is older than `drillMaxAgeMs` is stale.
 */
export async function usageReport(
  store: UsageStore,
  now: number,
  planQuotas: PlanQuotas,
  drillMaxAgeMs = DEFAULT_DRILL_MAX_AGE_MS,
): Promise<UsageReport> {
  const plans = Object.fromEntries(PLANS.map((plan) => [plan, zero()])) as Record<Plan, PlanTotals>;
  const totals: UsageTotals = { ...zero(), plans };
  const [rows, safety] = await Promise.all([store.usage(now), safetyByAccount(store, now, drillMaxAgeMs)]);
  const usageOf = (row: AccountUsageRow) => accountUsage(row, now, planQuotas, safety.get(row.accountId));
  const accounts = fleets(rows).map(({ owner, hosts }): OwnerUsage => {
    const head = usageOf(owner);
    const hostAccounts = hosts.map((row) => ({
      ...usageOf(row),
      quotaBytes: head.quotaBytes,
      quotaSource: 'owner' as const,
      hostLabel: row.hostLabel,
    }));
    const members = [head, ...hostAccounts];
    const storedBytes = members.reduce((sum, a) => sum + a.storedBytes, 0);
    const fleet: FleetTotal = {
      accounts: members.length,
      storedBytes,
      backups: members.reduce((sum, a) => sum + a.backups, 0),
      overdue: members.filter((a) => a.overdue).length,
      atQuota: atQuota(head.quotaBytes, storedBytes),
      ...fleetSafety(members),
    };
    for (const sum of [totals, plans[head.plan]]) {
      sum.accounts += fleet.accounts;
      sum.hostAccounts += hostAccounts.length;
      sum.storedBytes += fleet.storedBytes;
      sum.backups += fleet.backups;
      sum.overdue += fleet.overdue;
      sum.atQuota += fleet.atQuota ? 1 : 0;
      addSafety(sum, members);
    }
    return { ...head, hostAccounts, fleet };
  });
  return { at: iso(now), drillMaxAgeMs, accounts, totals };
}
