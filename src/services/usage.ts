/**
 * Usage per account and in total (docs/operations.md#usage): what `coffer admin usage`, /metrics and the operator
 * console show. Sizes, times and counts only: never a file name, metadata or key material (the store's usage rows
 * hold none).
 */
import { PLANS, type Plan } from '../domain/plans.js';
import { effectiveQuota, isOverdue, type PlanQuotas } from '../domain/quotas.js';
import { iso } from '../domain/time.js';
import type { AccountUsageRow, Store } from '../store/store.js';

export interface AccountUsage {
  accountId: string;
  plan: Plan;
  /** The quota that applies (bytes; null: none) and where it comes from: the plan's setting or the account's own. */
  quotaBytes: number | null;
  quotaSource: 'plan' | 'account';
  /** Ciphertext of READY and UPLOADED backups, of backups in their deletion grace, and bytes reserved by uploads. */
  storedBytes: number;
  /** READY backups. */
  backups: number;
  /** When the newest READY backup was created (null: never). */
  lastReadyAt: string | null;
  /** No READY backup for more than twice the plan interval (counted from the account's creation if never). */
  overdue: boolean;
}

export interface PlanTotals {
  accounts: number;
  storedBytes: number;
  backups: number;
  overdue: number;
}

export interface UsageTotals extends PlanTotals {
  /** Per plan, every plan present (zeros included). */
  plans: Record<Plan, PlanTotals>;
}

export interface UsageReport {
  at: string;
  accounts: AccountUsage[];
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

const zero = (): PlanTotals => ({ accounts: 0, storedBytes: 0, backups: 0, overdue: 0 });

/** Every account's usage at `now` (oldest account first) and the totals. */
export async function usageReport(store: Store, now: number, planQuotas: PlanQuotas): Promise<UsageReport> {
  const accounts = (await store.usage(now)).map((row) => accountUsage(row, now, planQuotas));
  const plans = Object.fromEntries(PLANS.map((plan) => [plan, zero()])) as Record<Plan, PlanTotals>;
  const totals: UsageTotals = { ...zero(), plans };
  for (const account of accounts) {
    for (const sum of [totals, plans[account.plan]]) {
      sum.accounts += 1;
      sum.storedBytes += account.storedBytes;
      sum.backups += account.backups;
      sum.overdue += account.overdue ? 1 : 0;
    }
  }
  return { at: iso(now), accounts, totals };
}
