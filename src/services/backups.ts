/**
 * The backup's life (docs/api-rules.md#states): a slot is created (within the plan's cadence and the quota), its
 * ciphertext uploaded, the backup finalized and read, then deleted (src/services/retention.ts keeps the grace and the
 * sweep). The domain rules applied to the backup port, the blob store and the status bus.
 */
import type { Readable } from 'node:stream';
import { v7 as uuidv7 } from 'uuid';
import {
  BlobLockedError,
  type BlobStore,
  type ByteRange,
  type DirectTransfers,
  lockOption,
  type PresignedRequest,
  type StoredBlob,
} from '../blobs/blob-store.js';
import {
  decideCreate,
  isVisible,
  objectLockUntil,
  retentionExpiresAt,
  slotExpiresAt,
  secondsUntil,
  sweepActionFor,
  type BackupStatus,
} from '../domain/backups.js';
import type { Clock } from '../domain/clock.js';
import type { Backup } from '../domain/entities.js';
import { AppError } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import { PLAN_RULES, type Plan } from '../domain/plans.js';
import { reservationFor } from '../domain/quotas.js';
import { iso } from '../domain/time.js';
import type { FinalizeInput } from '../domain/vault-input.js';
import type { StatusBus } from '../events/status-bus.js';
import type { Stores } from '../store/ports/stores.js';
import { binaryIssues } from './binary-fields.js';
import { limited, TooLarge } from './byte-limit.js';
import type { QuotaService } from './quotas.js';
import { VISIBLE_STATUSES, type RetentionService } from './retention.js';

export interface BackupServiceOptions {
  maxArchiveBytes: number;
  uploadWindowMs: number;
  /** Presigned GETs for clients (COFFER_S3_PRESIGNED=on): the extension s3-presigned-download. */
  transfers?: DirectTransfers;
  /** Presigned GETs for the store's own endpoint, which nginx proxies (COFFER_ACCEL_REDIRECT with the S3 store). */
  internalTransfers?: DirectTransfers;
}

/** A new upload slot: PENDING_UPLOAD, nothing uploaded or sealed yet. */
export function newSlot(id: string, accountId: string, createdAt: number, expiresAt: number): Backup {
  return {
    id,
    accountId,
    status: 'PENDING_UPLOAD',
    createdAt,
    expiresAt,
    updatedAt: createdAt,
    blobPath: `backups/${accountId}/${id}`,
    blobKey: null,
    ciphertextSizeBytes: null,
    plaintextSizeBytes: null,
    clientVersion: null,
    hostappVersion: null,
    cryptoVersion: 'v1',
    wrappedDek: null,
    wrappedDekNonce: null,
    encryptedMetadata: null,
    encryptedMetadataNonce: null,
    deletedAt: null,
    purgeAfter: null,
    lockedUntil: null,
    blobVersion: null,
  };
}

export class BackupService {
  constructor(
    private readonly ports: Pick<Stores, 'backups' | 'accounts'>,
    private readonly blobs: BlobStore,
    private readonly bus: StatusBus,
    private readonly clock: Clock,
    private readonly quotas: QuotaService,
    private readonly retention: RetentionService,
    private readonly options: BackupServiceOptions,
  ) {}

  private async changed(backup: Backup): Promise<Backup> {
    await this.bus.publish(backup);
    return backup;
  }

  // ---- backups ----

  async create(accountId: string): Promise<{ backup: Backup; plan: Plan }> {
    const now = this.clock.now();
    await this.quotas.refuseCreateAtQuota(accountId);
    const id = uuidv7();
    const backup = newSlot(id, accountId, now, slotExpiresAt(now, this.options.uploadWindowMs));
    let plan: Plan = 'free';
    const decision = await this.ports.backups.createBackup(
      accountId,
      now,
      (snapshot) => {
        plan = snapshot.plan;
        return decideCreate(snapshot, now);
      },
      backup,
    );
    if (decision.allowed) return { backup: await this.changed(backup), plan };
    switch (decision.reason) {
      case 'vault_not_initialized':
        throw new AppError('vault_not_initialized', 'Initialize the vault before creating a backup.');
      case 'upload_in_progress':
        throw new AppError('upload_in_progress', 'Another backup upload slot is still open.', {
          backupId: decision.backupId,
        });
      case 'backup_cadence_exceeded': {
        const retryAfter = secondsUntil(decision.nextAllowedAt, now);
        throw new AppError(
          'backup_cadence_exceeded',
          `The ${plan} plan allows one backup per ${PLAN_RULES[plan].intervalWords}.`,
          {
            nextAllowedAt: iso(decision.nextAllowedAt),
            backupInterval: PLAN_RULES[plan].interval,
            retryAfterSeconds: retryAfter,
            // The caller's own account and plan: what an operator needs to move it to a shorter interval.
            accountId,
            plan,
          },
          { 'retry-after': String(retryAfter) },
        );
      }
    }
  }

  async list(accountId: string): Promise<Backup[]> {
    // Expired and failed records are pruned before a list is built (docs/api-rules.md#states). The listed records
    // themselves tell whether any is due, so the common case costs one query instead of a sweep query plus the list
    // (bench P3). Unfinished deletes are not listed: the background sweeper completes those.
    const now = this.clock.now();
    const visible = await this.ports.backups.listBackups(accountId, VISIBLE_STATUSES);
    if (!visible.some((backup) => sweepActionFor(backup.status, backup.expiresAt, now, backup.purgeAfter) !== null)) return visible;
    await this.retention.sweep(accountId);
    return this.ports.backups.listBackups(accountId, VISIBLE_STATUSES);
  }

  /**
   * The caller's visible backup with this id, after applying any expiry that is due.
   * Unknown, malformed, hidden and other accounts' ids are all undefined: they must look the same.
   */
  async findVisible(accountId: string, id: string): Promise<Backup | undefined> {
    if (!isUuid(id)) return undefined;
    let backup = await this.ports.backups.getBackup(id);
    if (!backup || backup.accountId !== accountId) return undefined;
    if (!isVisible(backup.status)) return undefined;
    if (sweepActionFor(backup.status, backup.expiresAt, this.clock.now()) !== null) {
      backup = (await this.retention.sweepOne(backup)) ?? (await this.ports.backups.getBackup(id))!;
    }
    return isVisible(backup.status) ? backup : undefined;
  }

  async getVisible(accountId: string, id: string): Promise<Backup> {
    const backup = await this.findVisible(accountId, id);
    if (!backup) throw new AppError('backup_not_found', 'No such backup.');
    return backup;
  }

  async uploadDirect(
    accountId: string,
    backupId: string | undefined,
    body: Readable,
    contentLength: number | undefined,
  ): Promise<{ pathname: string; size: number }> {
    const issue = (message: string) => AppError.validation([{ path: 'backupId', message }]);
    if (backupId === undefined || backupId === '') throw issue('is required for a direct upload');
    if (!isUuid(backupId)) throw issue('must be a UUID');
    const backup = await this.findVisible(accountId, backupId);
    if (!backup) throw issue('does not name one of your backups');
    const max = this.options.maxArchiveBytes;
    if (contentLength !== undefined && contentLength > max) throw this.tooLarge();
    if (backup.status !== 'PENDING_UPLOAD') throw this.wrongState(backup.status);

    // The bytes are reserved against the quota in the database before any is stored: the declared length, or for
    // a body of unknown length what is left (the stream is cut there), so concurrent uploads cannot both fit.
    const reservation = { id: uuidv7(), accountId, backupId: backup.id, expiresAt: backup.expiresAt };
    const reserved = await this.quotas.reserveUpload(reservation, (quota, usage) => reservationFor(quota, usage, contentLength, max));
    if (reserved.reserved === null) throw this.quotas.quotaRefused('upload', reserved.quota, reserved.usage, contentLength);
    const cap = reserved.reserved;
    let released = false;
    try {
      const blobKey = this.newBlobKey(backup);
      const lockUntil = await this.objectLockFor(backup);
      let stored: StoredBlob;
      try {
        stored = await this.blobs.put(blobKey, limited(body, cap), { size: contentLength, ...lockOption(lockUntil) });
      } catch (error) {
        if (error instanceof TooLarge) {
          if (cap < max) {
            const now = await this.quotas.quota(accountId);
            throw this.quotas.quotaRefused('upload', now?.quota ?? cap, (now?.usage ?? cap) - cap);
          }
          throw this.tooLarge();
        }
        throw error;
      }
      // UPLOADED now counts the stored bytes: the reservation ends in the same commit as the record's update.
      await this.recordUpload(backup, blobKey, stored, reservation.id);
      released = true;
      return { pathname: backup.blobPath, size: stored.size };
    } finally {
      // Nothing was stored (or the update failed): the reservation ends. Deleting an ended one again is harmless.
      if (!released) await this.quotas.releaseUpload(reservation.id);
    }
  }

  /** A fresh blob key for one upload attempt into the slot (attempts never overwrite each other). */
  newBlobKey(backup: Backup): string {
    return `${backup.blobPath}/${uuidv7()}.bin`;
  }

  /**
   * With Object Lock, until when an object written now into the slot `backup` (PENDING_UPLOAD) is locked
   * (objectLockUntil); null when the store locks nothing.
   */
  async objectLockFor(backup: Backup): Promise<number | null> {
    if (this.blobs.objectLock === 'off') return null;
    const account = await this.ports.accounts.getAccount(backup.accountId);
    return objectLockUntil(backup.expiresAt, account?.plan ?? 'free', account?.deletionGraceDays ?? 0);
  }

  /**
   * With Object Lock, makes sure the stored object is locked at least until objectLockFor (PutObjectRetention where the
   * write did not set it: a client's own PUT, a store that ignores a multipart upload's lock); returns the lock's end.
   */
  private async lockStored(backup: Backup, blobKey: string, stored: StoredBlob): Promise<number | null> {
    const wanted = await this.objectLockFor(backup);
    if (wanted === null) return null;
    if (stored.lockedUntil !== null && stored.lockedUntil >= wanted) return stored.lockedUntil;
    await this.blobs.lock(blobKey, stored.version, wanted);
    return wanted;
  }

  /** Removes an upload attempt's object that no record names; one already locked stays for the orphan sweep. */
  async discardBlob(blobKey: string): Promise<void> {
    try {
      await this.blobs.delete(blobKey);
    } catch (error) {
      if (!(error instanceof BlobLockedError)) throw error;
    }
  }

  /**
   * Records that `blobKey` holds the slot's whole ciphertext (`stored`: its size and version): PENDING_UPLOAD → UPLOADED
   * (any upload protocol), locked first where Object Lock is on (lockStored). When another upload, a delete or expiry
   * got there first, this attempt's bytes are removed and the current state is reported as invalid_backup_state.
   * `reservationId` ends and the open upload `openUploadId` (multipart port) is forgotten in the same commit, whether or
   * not the update applies.
   */
  async recordUpload(backup: Backup, blobKey: string, stored: StoredBlob, reservationId?: string, openUploadId?: string): Promise<Backup> {
    const lockedUntil = await this.lockStored(backup, blobKey, stored);
    const uploaded = await this.ports.backups.updateBackup(
      backup.id,
      { statuses: ['PENDING_UPLOAD'] },
      {
        status: 'UPLOADED',
        blobKey,
        blobVersion: stored.version,
        lockedUntil,
        ciphertextSizeBytes: stored.size,
        updatedAt: this.clock.now(),
      },
      reservationId,
      openUploadId,
    );
    if (!uploaded) {
      await this.discardBlob(blobKey);
      const current = await this.ports.backups.getBackup(backup.id);
      throw this.wrongState(current?.status ?? 'DELETED');
    }
    return this.changed(uploaded);
  }

  private tooLarge(): AppError {
    const max = this.options.maxArchiveBytes;
    return new AppError('payload_too_large', `The encrypted archive is larger than ${max} bytes.`, {
      maxBytes: max,
    });
  }

  private wrongState(status: BackupStatus): AppError {
    return new AppError('invalid_backup_state', `The backup is ${status}.`, { status });
  }

  /** `backup`: the caller's visible backup (getVisible), as the request's onRequest step read it; not read again (bench P8). */
  async finalize(backup: Backup, input: FinalizeInput): Promise<Backup> {
    const issues = binaryIssues({
      wrappedDek: input.wrappedDek,
      wrappedDekNonce: input.wrappedDekNonce,
      encryptedMetadata: input.encryptedMetadata,
      encryptedMetadataNonce: input.encryptedMetadataNonce,
    });
    if (issues.length > 0) throw AppError.validation(issues);
    const account = await this.ports.accounts.getAccount(backup.accountId);
    const now = this.clock.now();
    const ready = await this.ports.backups.markReady(
      backup.id,
      { statuses: ['UPLOADED'], ciphertextSizeBytes: input.ciphertextSizeBytes },
      {
        wrappedDek: input.wrappedDek,
        wrappedDekNonce: input.wrappedDekNonce,
        encryptedMetadata: input.encryptedMetadata,
        encryptedMetadataNonce: input.encryptedMetadataNonce,
        plaintextSizeBytes: input.plaintextSizeBytes,
        clientVersion: input.clientVersion,
        hostappVersion: input.hostappVersion,
        expiresAt: retentionExpiresAt(now, account!.plan),
        updatedAt: now,
      },
    );
    if (ready) return this.changed(ready);
    const current = await this.ports.backups.getBackup(backup.id);
    if (!current || !isVisible(current.status)) throw new AppError('backup_not_found', 'No such backup.');
    if (current.status !== 'UPLOADED') throw this.wrongState(current.status);
    throw new AppError(
      'ciphertext_size_mismatch',
      `ciphertextSizeBytes is ${input.ciphertextSizeBytes} but ${current.ciphertextSizeBytes} bytes were uploaded.`,
      { uploadedSizeBytes: current.ciphertextSizeBytes },
    );
  }

  async openContent(
    accountId: string,
    id: string,
    range?: ByteRange,
  ): Promise<{ backup: Backup & { blobKey: string; ciphertextSizeBytes: number }; stream: Readable }> {
    const backup = await this.readyForContent(accountId, id);
    const stream = await this.blobs.get(backup.blobKey, range, backup.blobVersion);
    return { backup, stream };
  }

  /**
   * What openContent checks, without opening: the key of a READY backup's blob, which exists (for a proxy that
   * sends the bytes itself, COFFER_ACCEL_REDIRECT).
   */
  async locateContent(accountId: string, id: string): Promise<{ blobKey: string }> {
    const backup = await this.readyForContent(accountId, id);
    if ((await this.blobs.stat(backup.blobKey, backup.blobVersion)) === null) throw new Error(`the blob of backup ${backup.id} is missing`);
    return { blobKey: backup.blobKey };
  }

  /** Whether clients may fetch a READY backup's ciphertext from the store themselves (presignContent). */
  get offersPresignedDownload(): boolean {
    return this.options.transfers !== undefined;
  }

  /**
   * A short-lived GET of a READY backup's ciphertext straight from the object store, for the client
   * (extension s3-presigned-download, docs/api-rules.md#s3-presigned-download): the same checks as openContent.
   * `backup`: a backup the caller may read, as the request's onRequest step read it; not read again (bench P2-S3).
   */
  async presignContent(backup: Backup): Promise<{ request: PresignedRequest; size: number }> {
    const transfers = this.options.transfers;
    if (!transfers) throw new Error('presigned downloads are off (COFFER_S3_PRESIGNED)');
    const ready = this.withContent(backup);
    return { request: await transfers.presignGet(ready.blobKey, ready.blobVersion), size: ready.ciphertextSizeBytes };
  }

  /**
   * The checks of openContent, then a GET of the blob presigned for the store's own endpoint: the path and query
   * nginx proxies to it (COFFER_ACCEL_REDIRECT with the S3 store, docs/deploy.md#downloads-served-by-nginx). The
   * blob's existence is not checked first: the store answers for it (a HEAD would add a round trip to every
   * download, bench P2-S3). `backup`: as for presignContent.
   */
  async locateContentInStore(backup: Backup): Promise<{ pathAndQuery: string }> {
    const transfers = this.options.internalTransfers;
    if (!transfers) throw new Error('no presigner for the store’s own endpoint (COFFER_ACCEL_REDIRECT with S3)');
    const { blobKey, blobVersion } = this.withContent(backup);
    const url = new URL((await transfers.presignGet(blobKey, blobVersion)).url);
    return { pathAndQuery: `${url.pathname}${url.search}` };
  }

  private async readyForContent(accountId: string, id: string): Promise<Backup & { blobKey: string; ciphertextSizeBytes: number }> {
    return this.withContent(await this.getVisible(accountId, id));
  }

  /** The backup, if it is READY with its content; else backup_content_unavailable. */
  private withContent(backup: Backup): Backup & { blobKey: string; ciphertextSizeBytes: number } {
    if (backup.status !== 'READY' || backup.blobKey === null || backup.ciphertextSizeBytes === null) {
      throw new AppError('backup_content_unavailable', `The backup is ${backup.status}; only READY backups have content.`);
    }
    return backup as Backup & { blobKey: string; ciphertextSizeBytes: number };
  }

  /**
   * With a deletion grace, a READY backup becomes DELETING (hidden, ciphertext kept until purgeAfter) and that is
   * the answer; otherwise it is DELETED once its ciphertext is gone.
   */
  async delete(accountId: string, id: string): Promise<Backup> {
    const backup = await this.getVisible(accountId, id);
    const deleted = await this.retention.deleteRecord(backup, await this.retention.graceDays(accountId));
    if (!deleted) throw new AppError('backup_not_found', 'No such backup.');
    return deleted;
  }
}
