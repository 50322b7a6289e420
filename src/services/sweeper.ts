/**
 * The background sweeper: expiry, pruning, unfinished deletes and deletes whose grace has ended (BackupService.sweep),
 * expired vault history (BackupService.pruneVaultHistory), ended console sessions and login links
 * (SessionService.prune), plus orphan removal. A backup in its deletion grace still names its blob, so it is
 * never taken for an orphan, nor is a DELETED backup's object kept for its Object Lock (retention.ts releases it).
 * It runs under the Store's exclusive lock "sweeper" (a PostgreSQL advisory lock), so with several nodes only
 * one sweeps at a time; the others skip their turn.
 *
 * Orphans are blobs no record points at: a blob key (`backups/<account>/<backup>/<attempt>.bin`) is live only
 * while a record that is not DELETED names it in `blobKey`. Attempts that lost a race, uploads whose node died
 * between storing and recording, and leftovers of crashed deletes are orphans. A blob younger than the grace
 * period is never touched: it may belong to an upload that has stored its bytes but not yet recorded them.
 * Incomplete uploads (S3 multipart uploads, temp files) older than the grace period are discarded too; on a store
 * that cannot list them (no ListMultipartUploads) the first sweep reports one warning and later ones skip the step.
 * The blob host's multipart bookkeeping of slots that take no upload any more is dropped on every sweep.
 */
import { BlobLockedError, type BlobStore, UnsupportedOperationError } from '../blobs/blob-store.js';
import type { Stores } from '../store/ports/stores.js';
import type { RetentionService } from './retention.js';
import type { SessionService } from './sessions.js';
import type { VaultService } from './vault.js';

export interface SweeperOptions {
  /** Minimum age of a blob or incomplete upload before it may be removed as an orphan. */
  orphanGraceMs?: number;
  /** The orphan pass lists every blob, so it runs at most this often (per node). */
  orphanIntervalMs?: number;
  /** Real time, to compare with the storage's own timestamps (the injected clock may be a test clock). */
  wallClock?: () => number;
}

export interface SweepReport {
  /** false when another node held the sweeper lock. */
  ran: boolean;
  /** Records moved (expired, pruned, deletes finished). */
  moved: number;
  /** Ended console sessions and login links deleted. */
  sessions: number;
  /** Kept vault envelopes whose grace ended, deleted. */
  vaultHistory: number;
  /** Orphan blobs removed. */
  orphans: number;
  /** Incomplete uploads discarded. */
  incomplete: number;
  /** Said once per process: a step the store cannot do is skipped from now on. */
  warning?: string;
}

export const BLOB_PREFIX = 'backups/';
const HOUR = 3_600_000;

export class Sweeper {
  private lastOrphanPass = -Infinity;
  /** The store cannot list incomplete uploads (UnsupportedOperationError): the step is skipped. */
  private incompleteUnsupported = false;
  private readonly graceMs: number;
  private readonly intervalMs: number;
  private readonly wallClock: () => number;

  constructor(
    private readonly ports: Pick<Stores, 'database' | 'backups' | 'multipart'>,
    private readonly blobs: BlobStore,
    private readonly retention: Pick<RetentionService, 'sweep'>,
    private readonly vault: Pick<VaultService, 'pruneVaultHistory'>,
    private readonly sessions: SessionService,
    options: SweeperOptions = {},
  ) {
    this.graceMs = options.orphanGraceMs ?? HOUR;
    this.intervalMs = options.orphanIntervalMs ?? HOUR;
    this.wallClock = options.wallClock ?? Date.now;
  }

  /** One sweep, if no other node is sweeping. */
  async runOnce(options: { orphans?: boolean } = {}): Promise<SweepReport> {
    const outcome = await this.ports.database.tryExclusive('sweeper', async () => {
      const moved = await this.retention.sweep();
      const sessions = await this.sessions.prune();
      const vaultHistory = await this.vault.pruneVaultHistory();
      await this.ports.multipart.pruneMultipartUploads();
      const due = this.wallClock() - this.lastOrphanPass >= this.intervalMs;
      if (!(options.orphans ?? due)) return { moved, sessions, vaultHistory, orphans: 0, incomplete: 0 };
      this.lastOrphanPass = this.wallClock();
      return { moved, sessions, vaultHistory, ...(await this.removeOrphans()) };
    });
    return outcome.ran
      ? { ran: true, ...outcome.value }
      : { ran: false, moved: 0, sessions: 0, vaultHistory: 0, orphans: 0, incomplete: 0 };
  }

  /** false: the object is under an Object Lock (an attempt locked before it lost its race); a later pass removes it. */
  private async removeOrphan(key: string): Promise<boolean> {
    try {
      await this.blobs.delete(key);
      return true;
    } catch (error) {
      if (error instanceof BlobLockedError) return false;
      throw error;
    }
  }

  /** Removes orphan blobs and incomplete uploads older than the grace period (or `graceMs`). */
  async removeOrphans(graceMs = this.graceMs): Promise<{ orphans: number; incomplete: number; warning?: string }> {
    const cutoff = this.wallClock() - graceMs;
    let orphans = 0;
    let batch: string[] = [];
    const flush = async () => {
      const live = await this.ports.backups.liveBlobKeys(batch);
      for (const key of batch) {
        if (live.has(key)) continue;
        if (await this.removeOrphan(key)) orphans += 1;
      }
      batch = [];
    };
    for await (const entry of this.blobs.list(BLOB_PREFIX)) {
      if (entry.modifiedAt > cutoff) continue;
      batch.push(entry.key);
      if (batch.length >= 500) await flush();
    }
    if (batch.length > 0) await flush();
    if (this.incompleteUnsupported) return { orphans, incomplete: 0 };
    try {
      return { orphans, incomplete: await this.blobs.removeIncomplete(cutoff) };
    } catch (error) {
      if (!(error instanceof UnsupportedOperationError)) throw error;
      this.incompleteUnsupported = true;
      return {
        orphans,
        incomplete: 0,
        warning: `incomplete multipart uploads are not cleaned up: ${error.message} (set a lifecycle rule on the bucket instead)`,
      };
    }
  }
}
