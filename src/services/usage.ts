/**
 * Usage per account and in total (docs/operations.md#usage): what `coffer admin usage`, /metrics and the operator
 * console show. An owner's host accounts are listed under it with the fleet's total: the owner's quota covers them all
 * (docs/operations.md#fleets). Sizes, times and counts only: never a file name, metadata or key material (the store's
 * usage rows hold none).
 */
import { PLANS, type Plan } from '../domain/plans.js';
import { atQuota, effectiveQuota, isOverdue, type PlanQuotas } from '../domain/quotas.js';
import { iso } from '../domain/time.js';
import type { AccountUsageRow, UsageStore } from '../store/ports/usage.js';

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
}

export interface UsageTotals extends PlanTotals {
  /** Per plan, every plan present (zeros included). */
  plans: Record<Plan, PlanTotals>;
}

export interface UsageReport {
  at: string;
  /** Owners and ordinary accounts, oldest first, each with its host accounts. */
  accounts: OwnerUsage[];
  totals: UsageTotals;
}

export function accountUsage(row: AccountUsageRow, now: number, planQuotas: PlanQuotas): AccountUsage {
  return {
    accountId: row.accountId,
    plan: row.plan,
    quotaBytes: effectiveQuota(row.plan, row.quotaOverride, planQuotas),
    quotaSource: row.quotaOverride === undefined ? 'plan' : 'account',
    storedBytes: row.storedBytes,
    backups: row.backups,
    lastReadyAt: row.lastReadyAt === null ? null : iso(row.lastReadyAt),
    overdue: isOverdue(row.plan, row.lastReadyAt, row.createdAt, now),
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

const zero = (): PlanTotals => ({ accounts: 0, hostAccounts: 0, storedBytes: 0, backups: 0, overdue: 0, atQuota: 0 });

/** Every account's usage at `now` (owners oldest first, each with its host accounts) and the totals. */
export async function usageReport(store: UsageStore, now: number, planQuotas: PlanQuotas): Promise<UsageReport> {
  const plans = Object.fromEntries(PLANS.map((plan) => [plan, zero()])) as Record<Plan, PlanTotals>;
  const totals: UsageTotals = { ...zero(), plans };
  const accounts = fleets(await store.usage(now)).map(({ owner, hosts }): OwnerUsage => {
    const head = accountUsage(owner, now, planQuotas);
    const hostAccounts = hosts.map((row) => ({
      ...accountUsage(row, now, planQuotas),
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
    };
    for (const sum of [totals, plans[head.plan]]) {
      sum.accounts += fleet.accounts;
      sum.hostAccounts += hostAccounts.length;
      sum.storedBytes += fleet.storedBytes;
      sum.backups += fleet.backups;
      sum.overdue += fleet.overdue;
      sum.atQuota += fleet.atQuota ? 1 : 0;
    }
    return { ...head, hostAccounts, fleet };
  });
  return { at: iso(now), accounts, totals };
}
