/** Backup records: creation under the cadence and quota rules, compare-and-set changes, and what the sweeper looks for. */
import type { BackupStatus, CreateDecision, CreateSnapshot } from '../../domain/backups.js';
import type { Backup } from '../../domain/entities.js';

export type BackupPatch = Partial<Omit<Backup, 'id' | 'accountId' | 'createdAt' | 'blobPath'>>;

export interface BackupCondition {
  statuses: readonly BackupStatus[];
  ciphertextSizeBytes?: number;
  /** Only a record scheduled for deletion (purgeAfter set), due after `dueAfter` and/or by `dueBy` (inclusive). */
  scheduled?: { dueAfter?: number; dueBy?: number };
}

export interface BackupStore {
  /**
   * Atomically reads the account's create snapshot at `now`, asks `decide`, and inserts `backup` when allowed.
   * Concurrent calls for one account are serialized by the database, so at most one is allowed.
   */
  createBackup(
    accountId: string,
    now: number,
    decide: (snapshot: CreateSnapshot) => CreateDecision,
    backup: Backup,
  ): Promise<CreateDecision>;
  getBackup(id: string): Promise<Backup | undefined>;
  /** The account's backups in the given statuses, newest first. */
  listBackups(accountId: string, statuses: readonly BackupStatus[]): Promise<Backup[]>;
  /**
   * Compare-and-set: applies `patch` only when the record matches `condition`; returns the new record. With
   * `releaseUpload`, that upload reservation also ends (releaseUpload) in the same commit, whether or not the update
   * applies; with `forgetOpenUpload`, so does that open upload of the multipart port (removeMultipartUpload).
   */
  updateBackup(
    id: string,
    condition: BackupCondition,
    patch: BackupPatch,
    releaseUpload?: string,
    forgetOpenUpload?: string,
  ): Promise<Backup | undefined>;
  /** Like updateBackup to READY, and records the backup's createdAt as the account's last READY (cadence). */
  markReady(id: string, condition: BackupCondition, patch: BackupPatch): Promise<Backup | undefined>;
  /**
   * Records needing sweeper action at `now` (expired in-flight, FAILED, expired READY, DELETING not in grace at `now`,
   * DELETED whose object was kept for an Object Lock that has ended by `now`).
   */
  listSweepCandidates(now: number, accountId?: string): Promise<Backup[]>;
  /**
   * The subset of `blobKeys` still referenced by a record that is not DELETED, or by a DELETED one whose object waits
   * for its Object Lock to end (lockedUntil set: the sweeper removes it then), for orphan sweeping.
   */
  liveBlobKeys(blobKeys: readonly string[]): Promise<Set<string>>;
}
