/** Billing plans and what they allow (docs/api-rules.md#cadence). Pure data. */
export const PLANS = ['free', 'plus', 'pro'] as const;
export type Plan = (typeof PLANS)[number];

export const BACKUP_INTERVALS = ['30m', '4h', '1d'] as const;
export type BackupInterval = (typeof BACKUP_INTERVALS)[number];

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface PlanRules {
  interval: BackupInterval;
  intervalMs: number;
  /** Human words for the interval, used in X-RateLimit-Policy comments and messages. */
  intervalWords: string;
  retentionMs: number;
}

export const PLAN_RULES: Record<Plan, PlanRules> = {
  free: { interval: '1d', intervalMs: DAY, intervalWords: 'day', retentionMs: 7 * DAY },
  plus: { interval: '4h', intervalMs: 4 * HOUR, intervalWords: '4 hours', retentionMs: 30 * DAY },
  pro: { interval: '30m', intervalMs: 30 * 60_000, intervalWords: '30 minutes', retentionMs: 90 * DAY },
};

export function isPlan(value: string): value is Plan {
  return (PLANS as readonly string[]).includes(value);
}

/** `X-RateLimit-Policy` value for a plan (docs/api-rules.md#cadence). */
export function rateLimitPolicy(plan: Plan): string {
  const rules = PLAN_RULES[plan];
  return `1;w=${rules.intervalMs / 1000};comment="${plan} plan: 1 backup per ${rules.intervalWords}"`;
}
