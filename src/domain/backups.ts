/** Backup lifecycle rules (docs/api-rules.md#states, #cadence, #account): pure functions over plain values, no I/O. */
import { PLAN_RULES, type Plan } from './plans.js';

export const BACKUP_STATUSES = ['PENDING_UPLOAD', 'UPLOADED', 'READY', 'FAILED', 'DELETING', 'DELETED'] as const;
export type BackupStatus = (typeof BACKUP_STATUSES)[number];

export const TERMINAL_STATUSES: readonly BackupStatus[] = ['READY', 'FAILED', 'DELETED'];
export const IN_FLIGHT_STATUSES: readonly BackupStatus[] = ['PENDING_UPLOAD', 'UPLOADED'];
export const HIDDEN_STATUSES: readonly BackupStatus[] = ['DELETING', 'DELETED'];

export const isTerminal = (status: BackupStatus): boolean => TERMINAL_STATUSES.includes(status);
export const isVisible = (status: BackupStatus): boolean => !HIDDEN_STATUSES.includes(status);

/** What the database knows about an account at the moment a create is attempted. */
export interface CreateSnapshot {
  plan: Plan;
  vaultInitialized: boolean;
  /** A non-expired PENDING_UPLOAD/UPLOADED record, if any. */
  inFlightBackupId: string | null;
  /** createdAt (ms) of the newest backup that ever reached READY; survives delete and reset. */
  lastReadyCreatedAt: number | null;
}

export type CreateDecision =
  | { allowed: true }
  | { allowed: false; reason: 'vault_not_initialized' }
  | { allowed: false; reason: 'upload_in_progress'; backupId: string }
  | { allowed: false; reason: 'backup_cadence_exceeded'; nextAllowedAt: number };

/** Order of refusals for create: vault, then one slot in flight, then cadence (docs/api-rules.md#statuses). */
export function decideCreate(snapshot: CreateSnapshot, now: number): CreateDecision {
  if (!snapshot.vaultInitialized) return { allowed: false, reason: 'vault_not_initialized' };
  if (snapshot.inFlightBackupId !== null) {
    return { allowed: false, reason: 'upload_in_progress', backupId: snapshot.inFlightBackupId };
  }
  const next = nextAllowedAt(snapshot);
  if (next !== null && now < next) return { allowed: false, reason: 'backup_cadence_exceeded', nextAllowedAt: next };
  return { allowed: true };
}

/** When the plan's cadence next allows a backup (ms), counted from the newest backup that reached READY; null: no such backup. */
export function nextAllowedAt(account: Pick<CreateSnapshot, 'plan' | 'lastReadyCreatedAt'>): number | null {
  return account.lastReadyCreatedAt === null ? null : account.lastReadyCreatedAt + PLAN_RULES[account.plan].intervalMs;
}

/**
 * Overdue (the console's mark, docs/console.md): no backup reached READY within twice the plan's interval, counted
 * from the newest one that did (`lastReadyAt`, else the newest READY backup's creation), or from the account's
 * creation when none ever did.
 */
export function isOverdue(
  account: Pick<CreateSnapshot, 'plan' | 'lastReadyCreatedAt'> & { createdAt: number },
  lastReadyAt: number | null,
  now: number,
): boolean {
  const since = lastReadyAt ?? account.lastReadyCreatedAt ?? account.createdAt;
  return now - since > 2 * PLAN_RULES[account.plan].intervalMs;
}

/** A slot still open for its upload (it holds the account's one place in flight). */
export const isInFlight = (backup: { status: BackupStatus; expiresAt: number }, now: number): boolean =>
  IN_FLIGHT_STATUSES.includes(backup.status) && backup.expiresAt > now;

/** Whole seconds until `at`, never negative (Retry-After). */
export function secondsUntil(at: number, now: number): number {
  return Math.max(0, Math.ceil((at - now) / 1000));
}

export const slotExpiresAt = (createdAt: number, uploadWindowMs: number): number => createdAt + uploadWindowMs;
export const retentionExpiresAt = (finalizedAt: number, plan: Plan): number => finalizedAt + PLAN_RULES[plan].retentionMs;

/**
 * A record the sweeper must act on at `now`, and what it must do; 'release': a DELETED record's object, kept while its
 * Object Lock lasted, goes now.
 */
export type SweepAction = 'fail' | 'prune' | 'finish-delete' | 'release' | null;

/**
 * `purgeAfter`: for a DELETING record in its deletion grace, when its ciphertext goes (null: a delete under way,
 * which the sweeper finishes at once). `lockedUntil`: for a DELETED record, when the Object Lock that kept its object
 * ends (null: nothing kept).
 */
export function sweepActionFor(
  status: BackupStatus,
  expiresAt: number,
  now: number,
  purgeAfter: number | null = null,
  lockedUntil: number | null = null,
): SweepAction {
  switch (status) {
    case 'PENDING_UPLOAD':
    case 'UPLOADED':
      return expiresAt <= now ? 'fail' : null;
    case 'FAILED':
      return 'prune';
    case 'READY':
      return expiresAt <= now ? 'prune' : null;
    case 'DELETING':
      return purgeAfter === null || purgeAfter <= now ? 'finish-delete' : null;
    case 'DELETED':
      return lockedUntil !== null && lockedUntil <= now ? 'release' : null;
  }
}

/**
 * Until when a backup's object is locked (S3 Object Lock), written while its slot is open: the latest its expiry can be
 * (finalized by the end of the upload window `slotExpiresAt`, then kept for the plan's retention) plus the account's
 * deletion grace. A plan or grace changed later does not move it.
 */
export const objectLockUntil = (slotExpiresAt: number, plan: Plan, graceDays: number): number =>
  slotExpiresAt + PLAN_RULES[plan].retentionMs + graceDays * DAY_MS;

/** Whether an object locked until `lockedUntil` (null: not locked) must stay at `now`. */
export const isLocked = (lockedUntil: number | null, now: number): boolean => lockedUntil !== null && lockedUntil > now;

/** The ETag of a backup's ciphertext (its download and the blob host's put result): it changes only with the bytes. */
export const backupEtag = (id: string, size: number): string => `"${id}-${size}"`;

// ---- deletion grace and vault history (docs/api-rules.md#deletion-grace) ----

export const DAY_MS = 86_400_000;
/** The longest deletion grace an account may set, in days. */
export const MAX_DELETION_GRACE_DAYS = 90;
/**
 * Previous vault envelopes kept per account. Beyond it the oldest ones and the newest stay and those between go, so a
 * burst of rotations by a stolen key cannot push the owner's real envelope out (they all expire with the grace).
 */
export const VAULT_HISTORY_LIMIT = 10;
/** How recent the console sign-in must be to purge a backup early or shorten the grace (a fresh sign-in). */
export const FRESH_SIGN_IN_MS = 5 * 60_000;

export const isDeletionGrace = (days: unknown): days is number =>
  typeof days === 'number' && Number.isInteger(days) && days >= 0 && days <= MAX_DELETION_GRACE_DAYS;

/**
 * When a delete requested at `now` removes the ciphertext, or null to remove it at once. Only READY backups get
 * a grace (an unfinished or failed upload has nothing to restore), and the grace never outlives the plan's
 * retention: plan expiry is not delayed.
 */
export function purgeAfterFor(backup: { status: BackupStatus; expiresAt: number }, graceDays: number, now: number): number | null {
  if (graceDays <= 0 || backup.status !== 'READY') return null;
  const due = Math.min(now + graceDays * DAY_MS, backup.expiresAt);
  return due > now ? due : null;
}

/** A backup scheduled for deletion that its owner can still restore to READY at `now`. */
export const isRestorable = (backup: { status: BackupStatus; purgeAfter: number | null }, now: number): boolean =>
  backup.status === 'DELETING' && backup.purgeAfter !== null && backup.purgeAfter > now;

/** Until when a vault envelope replaced at `now` stays restorable, or null when none is kept (grace 0). */
export const vaultHistoryExpiresAt = (graceDays: number, now: number): number | null => (graceDays > 0 ? now + graceDays * DAY_MS : null);

/** Whether a console session opened at `signedInAt` counts as a fresh sign-in at `now`. */
export const isFreshSignIn = (signedInAt: number, now: number): boolean => now - signedInAt <= FRESH_SIGN_IN_MS && now >= signedInAt;
