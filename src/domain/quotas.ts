/** Storage quotas and account freshness (docs/api-rules.md#quota, docs/operations.md#usage). Pure rules. */
import { PLAN_RULES, type Plan } from './plans.js';

/** A quota in bytes, or null: no quota. */
export type Quota = number | null;

/** Per plan (COFFER_QUOTA_<PLAN>): unset plans have no quota. */
export type PlanQuotas = Readonly<Partial<Record<Plan, number>>>;

/**
 * An account's own quota: undefined follows its plan, null is "no quota" whatever the plan says, a number replaces
 * the plan's.
 */
export type QuotaOverride = number | null | undefined;

export function effectiveQuota(plan: Plan, override: QuotaOverride, planQuotas: PlanQuotas): Quota {
  if (override !== undefined) return override;
  return planQuotas[plan] ?? null;
}

/** POST /api/backups is refused when the account is at or over its quota. */
export function atQuota(quota: Quota, usage: number): boolean {
  return quota !== null && usage >= quota;
}

/**
 * How many bytes an upload may reserve: its declared length when it fits (null when it does not); for an upload of
 * unknown length, what is left under the quota, at most `max` (null when nothing is left).
 */
export function reservationFor(quota: Quota, usage: number, declared: number | undefined, max: number): number | null {
  const left = quota === null ? max : Math.min(max, quota - usage);
  if (declared !== undefined) return declared <= left ? declared : null;
  return left > 0 ? left : null;
}

/**
 * Overdue: no READY backup for more than twice the plan interval. An account that never had one counts from its
 * creation, so a host that was set up and then never backed up shows too.
 */
export function isOverdue(plan: Plan, lastReadyAt: number | null, createdAt: number, now: number): boolean {
  return now - (lastReadyAt ?? createdAt) > 2 * PLAN_RULES[plan].intervalMs;
}

/** An account's quota setting in the audit trail's words: its plan's, none, or a number of bytes. */
export function quotaWords(override: QuotaOverride): string {
  return override === undefined ? 'plan' : override === null ? 'none' : `${override} bytes`;
}

/** Parses `<bytes>` or `none` (an operator's quota); undefined when it is neither. */
export function parseQuota(text: string): Quota | undefined {
  if (text === 'none') return null;
  if (!/^\d{1,16}$/.test(text)) return undefined;
  const bytes = Number(text);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}
