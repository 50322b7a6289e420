/** What accounts and fleets store, and the upload reservations that count against their quota. */
import type { Account } from '../../domain/entities.js';
import type { Plan } from '../../domain/plans.js';

/** One account's storage, counts and freshness, as the operator sees it: sizes, times and counts, nothing else. */
export interface AccountUsageRow {
  accountId: string;
  /** A host account's owner (its fleet's quota is the owner's); null for an owner or an ordinary account. */
  ownerAccountId: string | null;
  /** A host account's name as its owner gave it; null otherwise. */
  hostLabel: string | null;
  plan: Plan;
  createdAt: number;
  /** The account's own quota (null: none); absent: its plan's. */
  quotaOverride?: number | null;
  /** Ciphertext of READY and UPLOADED backups, of backups in their deletion grace, and bytes reserved by uploads. */
  storedBytes: number;
  /** READY backups. */
  backups: number;
  /** Backups deleted but still restorable (DELETING in their deletion grace). */
  graceBackups: number;
  /** Uploads in progress (PENDING_UPLOAD, UPLOADED). */
  uploadingBackups: number;
  /** READY or DELETING backups created at or after usage()'s `since` (0 without it). */
  createdSince: number;
  lastReadyAt: number | null;
}

/** What a restore drill reported (as its client claimed it: the server cannot check an attestation's mac). */
export type DrillResult = 'passed' | 'failed';

/**
 * One account's restore drills and Object Lock retention, as the operator sees them: times and counts only, never an
 * attestation's payload or a backup's metadata.
 */
export interface AccountSafetyRow {
  accountId: string;
  /** When the server recorded the newest attestation of any of the account's backups (null: never drilled). */
  lastDrillAt: number | null;
  /** What that newest attestation reported (null: never drilled). */
  lastDrillResult: DrillResult | null;
  /** Backups not DELETED whose object the store keeps locked after `now`. */
  lockedBackups: number;
  /** DELETED records whose object is still locked after `now` (it stays in the bucket until then). */
  lockedDeletedBackups: number;
  /** Ciphertext bytes of those locked objects, DELETED records included. */
  lockedBytes: number;
  /** The latest retain-until of those locked objects (null: none locked). */
  lockedUntil: number | null;
}

/** A backup whose object the store keeps locked (S3 Object Lock) after `now`: ids, status, size and times only. */
export interface LockedBackupRow {
  backupId: string;
  accountId: string;
  status: string;
  ciphertextSizeBytes: number | null;
  lockedUntil: number;
}

/** What counts against one quota: an owner (or ordinary account) and every host account it made. */
export interface FleetUsage {
  /** The fleet's owner: its plan and own quota give the fleet's quota. */
  owner: Account;
  /** What the whole fleet stores now, as AccountUsageRow.storedBytes counts it for each account. */
  storedBytes: number;
  /** Accounts in the fleet: the owner and its host accounts. */
  accounts: number;
}

/** An upload's reservation of bytes against the account's quota. */
export interface UploadReservation {
  id: string;
  accountId: string;
  backupId: string;
  expiresAt: number;
}

/** What reserveUpload decided: the bytes reserved, or the quota and usage that left no room. */
export type ReserveResult = { reserved: number } | { reserved: null; quota: number; usage: number };

export interface UsageStore {
  /**
   * Storage, counts and freshness of every account (or one), at `now` (reservations expired by then do not count):
   * the one source of per-account numbers for quotas, `coffer admin usage`, /metrics and the operator console.
   * `since` bounds createdSince.
   */
  usage(now: number, accountId?: string, since?: number): Promise<AccountUsageRow[]>;
  /** Restore drills and locked objects of every account (or one), in usage()'s order. */
  safety(now: number, accountId?: string): Promise<AccountSafetyRow[]>;
  /** The backups (DELETED records included) whose object is locked after `now`, latest retain-until first. */
  lockedBackups(now: number, accountId?: string): Promise<LockedBackupRow[]>;
  /** The fleet `accountId` belongs to (its owner's, or its own) and what the whole fleet stores at `now`. */
  fleetUsage(now: number, accountId: string): Promise<FleetUsage | undefined>;
  /**
   * Reserves bytes for an upload against its fleet's quota, in one transaction holding the fleet owner's row lock, so
   * concurrent uploads of the owner and all its host accounts on any node see each other: `quotaOf` gives the quota
   * from the fleet's owner, `size` the bytes wanted for it and the fleet's usage (null quota: no limit). Stores and
   * returns the reservation, or says the quota and usage that refused it.
   */
  reserveUpload(
    reservation: UploadReservation,
    now: number,
    size: (quota: number | null, usage: number) => number | null,
    quotaOf: (account: Account) => number | null,
  ): Promise<ReserveResult>;
  /**
   * Ends an upload's reservation (its bytes are now the backup's, or were never stored), and those grouped under it:
   * ids `<id>.<anything>` (a presigned multipart upload's parts).
   */
  releaseUpload(id: string): Promise<void>;
}
