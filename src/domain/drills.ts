/**
 * Restore drills as the operator sees them (docs/operations.md#restore-drills): how old an account's newest drill is,
 * and when that is too old. The result shown is the one the drill reported; the server cannot check an attestation.
 */

/** COFFER_DRILL_MAX_AGE's default: an account whose newest drill is older than this is stale. */
export const DEFAULT_DRILL_MAX_AGE_MS = 14 * 24 * 3_600_000;

/** An account drilled at least once whose newest drill is older than `maxAgeMs` at `now` (never drilled: not stale). */
export const isDrillStale = (lastDrillAt: number | null, now: number, maxAgeMs: number): boolean =>
  lastDrillAt !== null && now - lastDrillAt > maxAgeMs;

/** "3d ago", "5h ago", "12m ago", "just now": how long before `now` a time was, in its largest whole unit. */
export function ageText(at: number, now: number): string {
  const minutes = Math.floor(Math.max(0, now - at) / 60_000);
  if (minutes < 1) return 'just now';
  if (minutes < 60) return `${minutes}m ago`;
  const hours = Math.floor(minutes / 60);
  return hours < 24 ? `${hours}h ago` : `${Math.floor(hours / 24)}d ago`;
}
