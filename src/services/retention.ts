/**
 * Deletion grace and retention (docs/api-rules.md#deletion-grace, #states): deleting a backup (at once, or into its
 * grace), the backups scheduled for deletion (restore, purge early), the account's grace, and the sweep that applies
 * every due transition (expiry, pruning by the plan's retention, unfinished deletes, graces that ended).
 */
import { BlobLockedError, type BlobStore } from '../blobs/blob-store.js';
import {
  BACKUP_STATUSES,
  IN_FLIGHT_STATUSES,
  MAX_DELETION_GRACE_DAYS,
  isDeletionGrace,
  isLocked,
  isRestorable,
  isVisible,
  purgeAfterFor,
  sweepActionFor,
} from '../domain/backups.js';
import type { Clock } from '../domain/clock.js';
import type { Backup } from '../domain/entities.js';
import { AppError } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import type { StatusBus } from '../events/status-bus.js';
import type { Stores } from '../store/ports/stores.js';

/** The statuses a client sees (docs/api-rules.md#states). */
export const VISIBLE_STATUSES = BACKUP_STATUSES.filter(isVisible);

const notScheduled = () => new AppError('backup_not_found', 'No backup with this id is scheduled for deletion.');

export class RetentionService {
  constructor(
    private readonly ports: Pick<Stores, 'backups' | 'accounts'>,
    private readonly blobs: BlobStore,
    private readonly bus: StatusBus,
    private readonly clock: Clock,
  ) {}

  private async changed(backup: Backup): Promise<Backup> {
    await this.bus.publish(backup);
    return backup;
  }

  /** The account's deletion grace in days (0: none, or no such account). */
  async graceDays(accountId: string): Promise<number> {
    return (await this.ports.accounts.getAccount(accountId))?.deletionGraceDays ?? 0;
  }

  async setDeletionGrace(accountId: string, days: number): Promise<void> {
    if (!isDeletionGrace(days)) {
      throw AppError.validation([{ path: 'days', message: `must be a whole number of days from 0 to ${MAX_DELETION_GRACE_DAYS}` }]);
    }
    if (!(await this.ports.accounts.setDeletionGrace(accountId, days))) throw new Error(`account ${accountId} vanished`);
  }

  /** The account's backups scheduled for deletion that can still be restored, newest first. */
  async listScheduled(accountId: string): Promise<Backup[]> {
    const now = this.clock.now();
    return (await this.ports.backups.listBackups(accountId, ['DELETING'])).filter((backup) => isRestorable(backup, now));
  }

  /** A backup scheduled for deletion, of this account (any account when null); 404 otherwise. */
  private async findScheduled(accountId: string | null, id: string): Promise<Backup> {
    const backup = isUuid(id) ? await this.ports.backups.getBackup(id) : undefined;
    if (!backup || (accountId !== null && backup.accountId !== accountId) || !isRestorable(backup, this.clock.now())) {
      throw notScheduled();
    }
    return backup;
  }

  /** Returns a backup scheduled for deletion to READY (its ciphertext never left). accountId null: an operator. */
  async undelete(accountId: string | null, id: string): Promise<Backup> {
    const backup = await this.findScheduled(accountId, id);
    const now = this.clock.now();
    const restored = await this.ports.backups.updateBackup(
      backup.id,
      { statuses: ['DELETING'], scheduled: { dueAfter: now } },
      { status: 'READY', purgeAfter: null, deletedAt: null, updatedAt: now },
    );
    if (!restored) throw notScheduled();
    return this.changed(restored);
  }

  /** Ends the grace of a backup scheduled for deletion now: its ciphertext goes and the record becomes DELETED. */
  async purge(accountId: string, id: string): Promise<Backup> {
    const backup = await this.findScheduled(accountId, id);
    const claimed = await this.claimScheduled(backup, { dueAfter: this.clock.now() });
    const deleted = claimed && (await this.finishDelete(claimed));
    if (!deleted) throw notScheduled();
    return deleted;
  }

  /** Takes a scheduled delete out of its grace (purgeAfter → null): from here on nobody can restore it. */
  private claimScheduled(backup: Backup, scheduled: { dueAfter?: number; dueBy?: number }): Promise<Backup | undefined> {
    return this.ports.backups.updateBackup(
      backup.id,
      { statuses: ['DELETING'], scheduled },
      { purgeAfter: null, updatedAt: this.clock.now() },
    );
  }

  /**
   * visible → DELETING → (blob removed) → DELETED; with a grace (READY only), visible → DELETING with purgeAfter
   * set, and the sweeper finishes it when the grace ends. Returns undefined when someone else deleted it first.
   * Plan expiry (prune) passes graceDays 0: the grace never protects an expired backup.
   */
  async deleteRecord(backup: Backup, graceDays = 0): Promise<Backup | undefined> {
    const now = this.clock.now();
    const purgeAfter = purgeAfterFor(backup, graceDays, now);
    const deleting = await this.ports.backups.updateBackup(
      backup.id,
      { statuses: purgeAfter === null ? VISIBLE_STATUSES : ['READY'] },
      { status: 'DELETING', purgeAfter, updatedAt: now },
    );
    if (!deleting) return undefined;
    await this.changed(deleting);
    if (purgeAfter !== null) return deleting;
    return this.finishDelete(deleting);
  }

  /**
   * DELETING → DELETED, its ciphertext removed; an object still under its Object Lock stays (the record keeps
   * lockedUntil) and the sweeper removes it once the lock has ended ('release').
   */
  private async finishDelete(deleting: Backup): Promise<Backup | undefined> {
    const keptUntil = await this.removeBlob(deleting);
    const now = this.clock.now();
    const deleted = await this.ports.backups.updateBackup(
      deleting.id,
      { statuses: ['DELETING'] },
      { status: 'DELETED', deletedAt: now, updatedAt: now, lockedUntil: keptUntil },
    );
    if (deleted) return this.changed(deleted);
    // Someone else (the sweeper) finished it first: the outcome is the same.
    const current = await this.ports.backups.getBackup(deleting.id);
    return current?.status === 'DELETED' ? current : undefined;
  }

  /**
   * Removes a backup's object unless its Object Lock still holds it: returns null once it is gone, else until when it
   * stays (the recorded lock, or the store's own answer when it refuses: clocks differ, or the lock was extended).
   */
  private async removeBlob(backup: Backup): Promise<number | null> {
    const now = this.clock.now();
    if (backup.blobKey === null) return null;
    if (isLocked(backup.lockedUntil, now)) return backup.lockedUntil;
    try {
      await this.blobs.delete(backup.blobKey);
      return null;
    } catch (error) {
      if (!(error instanceof BlobLockedError)) throw error;
      return Math.max(error.lockedUntil ?? now, backup.lockedUntil ?? now);
    }
  }

  /** A DELETED record whose Object Lock has ended: its object goes now (or, if the store still refuses, later). */
  private async release(backup: Backup): Promise<Backup | undefined> {
    const keptUntil = await this.removeBlob(backup);
    const released = await this.ports.backups.updateBackup(
      backup.id,
      { statuses: ['DELETED'] },
      { lockedUntil: keptUntil, updatedAt: this.clock.now() },
    );
    return keptUntil === null ? released : undefined;
  }

  /** Applies every due transition; with an account id, only that account's. Returns how many records moved. */
  async sweep(accountId?: string): Promise<number> {
    let moved = 0;
    for (const backup of await this.ports.backups.listSweepCandidates(this.clock.now(), accountId)) {
      if (await this.sweepOne(backup)) moved += 1;
    }
    return moved;
  }

  /** Applies the transition that is due for one backup (sweepActionFor); undefined when none moved it. */
  async sweepOne(backup: Backup): Promise<Backup | undefined> {
    const now = this.clock.now();
    switch (sweepActionFor(backup.status, backup.expiresAt, now, backup.purgeAfter, backup.lockedUntil)) {
      case 'fail': {
        const failed = await this.ports.backups.updateBackup(
          backup.id,
          { statuses: IN_FLIGHT_STATUSES },
          { status: 'FAILED', updatedAt: now },
        );
        if (!failed) return undefined;
        await this.changed(failed);
        return this.sweepOne(failed);
      }
      case 'prune':
        return this.deleteRecord(backup);
      case 'finish-delete': {
        if (backup.purgeAfter === null) return this.finishDelete(backup);
        // The grace has ended: claim it (an undelete racing this loses), then remove the ciphertext.
        const claimed = await this.claimScheduled(backup, { dueBy: now });
        return claimed && this.finishDelete(claimed);
      }
      case 'release':
        return this.release(backup);
      case null:
        return undefined;
    }
  }
}
