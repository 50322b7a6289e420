/** Pure rules of the operator's view of accounts (docs/operations.md#operator-console). */
import { PLAN_RULES, type Plan } from './plans.js';

/** How far back "backups created recently" looks in the operator's totals. */
export const RECENT_WINDOW_MS = 24 * 3_600_000;

/**
 * An account is overdue when it has had no READY backup for more than twice its plan's interval: counted from its
 * last READY backup, or from its creation when it never had one.
 */
export function isOverdue(plan: Plan, lastReadyAt: number | null, createdAt: number, now: number): boolean {
  return now - (lastReadyAt ?? createdAt) > 2 * PLAN_RULES[plan].intervalMs;
}
