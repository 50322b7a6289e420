/**
 * The `s3-presigned` upload protocol (docs/upload-protocols.md#s3-presigned), negotiated on POST /api/backups/upload:
 * the client moves the ciphertext straight to the object store under presigned URLs, one PUT whose signature covers
 * the exact Content-Length, or the parts of a multipart upload, each signed with its length.
 *
 * What holds as for the other paths: the archive limit and the fleet's quota are applied when a size is signed (the
 * bytes are reserved against the quota before any URL leaves: usage port reserveUpload); at complete the object must
 * exist with exactly the signed size, or it is refused and what it left removed; the slot becomes UPLOADED as after a
 * direct upload (recordUpload, its reservation ended in the same commit).
 *
 * Bookkeeping, shared by every node through the database:
 * - each upload attempt has a key of its own, `<blobPath>/<u>.bin` (u a UUIDv7), and an open-upload record named `u`
 *   (the multipart port, as the blob host's uploads) whose parts hold the signed sizes (single PUT: part 1);
 * - the reservation of a single PUT is `u`; of a multipart upload's part n, `u.n` (a part signed again replaces
 *   its reservation). Ending `u` ends them all (docs: the usage port's releaseUpload).
 * Signed URLs are never logged nor put in errors.
 */
import { type Static, Type } from '@sinclair/typebox';
import {
  type BlobPart,
  type DirectTransfers,
  InvalidPartError,
  MAX_PART_NUMBER,
  type MultipartBlobStore,
  type PresignedRequest,
  UploadNotFoundError,
} from '../blobs/blob-store.js';
import type { Clock } from '../domain/clock.js';
import type { Backup } from '../domain/entities.js';
import { AppError } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import { reservationFor } from '../domain/quotas.js';
import { iso } from '../domain/time.js';
import type { Stores } from '../store/ports/stores.js';
import type { BackupService } from './backups.js';
import type { QuotaService } from './quotas.js';
import { checkBody } from './upload-handshake.js';

/** The negotiation types of this protocol all start with this. */
export const PRESIGNED_PREFIX = 's3-presigned.';
/** The extension named in `Coffer-Extensions` on POST /api/backups 201. */
export const PRESIGNED_UPLOAD_EXTENSION = 's3-presigned-upload';
/** S3's smallest part (all but the last), told to the client. */
export const MIN_PART_BYTES = 5 * 1024 * 1024;
/** S3's largest part. */
export const MAX_PART_BYTES = 5 * 1024 * 1024 * 1024;

const issue = (path: string, message: string) => ({ issue: { path, message } });
const uuid = (path: string) => Type.String(issue(path, 'must be a string'));
const bytes = (path: string, max = Number.MAX_SAFE_INTEGER) =>
  Type.Integer({ minimum: 0, maximum: max, ...issue(path, `must be a whole number of bytes from 0 to ${max}`) });
const payload = <T extends Parameters<typeof Type.Object>[0]>(properties: T) =>
  Type.Object({ payload: Type.Object(properties, issue('payload', 'must be an object')) });

const StartBody = payload({ backupId: uuid('payload.backupId'), size: Type.Optional(bytes('payload.size')) });
const PartBody = payload({
  backupId: uuid('payload.backupId'),
  uploadKey: Type.String(issue('payload.uploadKey', 'must be a string')),
  uploadId: Type.String({ minLength: 1, ...issue('payload.uploadId', 'must be the uploadId from s3-presigned.start') }),
  partNumber: Type.Integer({
    minimum: 1,
    maximum: MAX_PART_NUMBER,
    ...issue('payload.partNumber', `must be a whole number from 1 to ${MAX_PART_NUMBER}`),
  }),
  size: Type.Integer({
    minimum: 1,
    maximum: MAX_PART_BYTES,
    ...issue('payload.size', `must be a whole number of bytes from 1 to ${MAX_PART_BYTES}`),
  }),
});
const PartList = Type.Array(
  Type.Object({ partNumber: Type.Integer({ minimum: 1, maximum: MAX_PART_NUMBER }), etag: Type.String({ minLength: 1 }) }),
  { minItems: 1, maxItems: MAX_PART_NUMBER, ...issue('payload.parts', 'must be a list of {partNumber, etag} (1 to 10000)') },
);
const CompleteBody = payload({
  backupId: uuid('payload.backupId'),
  uploadKey: Type.String(issue('payload.uploadKey', 'must be a string')),
  uploadId: Type.Optional(Type.String({ minLength: 1, ...issue('payload.uploadId', 'must be the uploadId from s3-presigned.start') })),
  parts: Type.Optional(PartList),
  size: bytes('payload.size'),
});
const AbortBody = payload({
  backupId: uuid('payload.backupId'),
  uploadKey: Type.String(issue('payload.uploadKey', 'must be a string')),
  uploadId: Type.Optional(Type.String({ minLength: 1, ...issue('payload.uploadId', 'must be the uploadId from s3-presigned.start') })),
});

export interface PresignedUploadOptions {
  readonly maxArchiveBytes: number;
  readonly maxMultipartUploadsPerSlot: number;
}

function wire(request: PresignedRequest) {
  return { method: request.method, url: request.url, headers: request.headers, expiresAt: iso(request.expiresAt) };
}

export class PresignedUploadService {
  constructor(
    private readonly blobs: MultipartBlobStore,
    private readonly transfers: DirectTransfers,
    private readonly ports: Pick<Stores, 'multipart'>,
    private readonly backups: BackupService,
    private readonly quotas: QuotaService,
    private readonly clock: Clock,
    private readonly options: PresignedUploadOptions,
  ) {}

  /** One negotiation body (`type` starts with `s3-presigned.`) of the caller's; returns the 200 answer. */
  async negotiate(accountId: string, body: { type?: unknown }): Promise<Record<string, unknown>> {
    switch (body.type) {
      case 's3-presigned.start':
        checkBody(StartBody, body);
        return this.start(accountId, body.payload);
      case 's3-presigned.part':
        checkBody(PartBody, body);
        return this.part(accountId, body.payload);
      case 's3-presigned.complete':
        checkBody(CompleteBody, body);
        return this.complete(accountId, body.payload);
      case 's3-presigned.abort':
        checkBody(AbortBody, body);
        return this.abort(accountId, body.payload);
      default:
        throw AppError.validation([
          { path: 'type', message: 'must be s3-presigned.start, s3-presigned.part, s3-presigned.complete or s3-presigned.abort' },
        ]);
    }
  }

  /** The caller's visible slot (400 payload.backupId otherwise). */
  private async slot(accountId: string, backupId: string): Promise<Backup> {
    const backup = isUuid(backupId) ? await this.backups.findVisible(accountId, backupId) : undefined;
    if (!backup) throw AppError.validation([{ path: 'payload.backupId', message: 'does not name one of your backups' }]);
    return backup;
  }

  private pending(backup: Backup): Backup {
    if (backup.status !== 'PENDING_UPLOAD') {
      throw new AppError('invalid_backup_state', `The backup is ${backup.status}; it takes no upload.`, { status: backup.status });
    }
    return backup;
  }

  /** The upload attempt a key names (`<blobPath>/<u>.bin` of this slot): `u`, or 400 payload.uploadKey. */
  private attemptOf(backup: Backup, key: string): string {
    const name = key.startsWith(`${backup.blobPath}/`) ? key.slice(backup.blobPath.length + 1) : '';
    const id = name.slice(0, 36);
    if (name !== `${id}.bin` || !isUuid(id)) {
      throw AppError.validation([{ path: 'payload.uploadKey', message: 'must be the uploadKey s3-presigned.start gave for this backup' }]);
    }
    return id;
  }

  private tooLarge(): AppError {
    const max = this.options.maxArchiveBytes;
    return new AppError('payload_too_large', `The encrypted archive is larger than ${max} bytes.`, { maxBytes: max });
  }

  /**
   * Records the attempt `u` as open in the slot (a single PUT: with its size as part 1); refuses when the slot has
   * too many open (on any node). Counted once, after the record: one statement fewer than a count before it (bench P8).
   */
  private async open(backup: Backup, attempt: string, size: number | undefined, undo: () => Promise<void>): Promise<void> {
    const max = this.options.maxMultipartUploadsPerSlot;
    if ((await this.ports.multipart.addMultipartUpload(backup.id, attempt, this.clock.now(), size)) > max) {
      await this.ports.multipart.removeMultipartUpload(attempt);
      await undo();
      throw AppError.validation([
        { path: 'payload.backupId', message: `this backup already has ${max} uploads in progress: complete or abort one first` },
      ]);
    }
  }

  /** Reserves `size` bytes under `id` against the fleet's quota; refuses with 413 upload_exceeds_quota. */
  private async reserve(backup: Backup, id: string, size: number): Promise<void> {
    const reservation = { id, accountId: backup.accountId, backupId: backup.id, expiresAt: backup.expiresAt };
    const reserved = await this.quotas.reserveUpload(reservation, (quota, usage) =>
      reservationFor(quota, usage, size, this.options.maxArchiveBytes),
    );
    if (reserved.reserved === null) throw this.quotas.quotaRefused('upload', reserved.quota, reserved.usage, size);
  }

  async start(accountId: string, input: Static<typeof StartBody>['payload']): Promise<Record<string, unknown>> {
    const backup = this.pending(await this.slot(accountId, input.backupId));
    const key = this.backups.newBlobKey(backup);
    const attempt = this.attemptOf(backup, key);
    if (input.size === undefined) {
      const uploadId = await this.blobs.createMultipart(key);
      await this.open(backup, attempt, undefined, () => this.blobs.abortMultipart(key, uploadId));
      return {
        type: 's3-presigned.start',
        mode: 'multipart',
        uploadKey: key,
        uploadId,
        minPartBytes: MIN_PART_BYTES,
        maxParts: MAX_PART_NUMBER,
      };
    }
    const { size } = input;
    if (size > this.options.maxArchiveBytes) throw this.tooLarge();
    await this.open(backup, attempt, size, async () => {});
    try {
      await this.reserve(backup, attempt, size);
    } catch (error) {
      await this.quotas.releaseUpload(attempt);
      await this.ports.multipart.removeMultipartUpload(attempt);
      throw error;
    }
    const request = await this.transfers.presignPut(key, size);
    return { type: 's3-presigned.start', mode: 'single', uploadKey: key, request: wire(request) };
  }

  /**
   * One part's URL. The upload's signed parts together stay within the archive limit (a part signed again counts
   * once, with its latest size; parts signed at the same time on several nodes are checked together once recorded),
   * and each part's bytes are reserved against the quota before its URL is given.
   */
  async part(accountId: string, input: Static<typeof PartBody>['payload']): Promise<Record<string, unknown>> {
    const backup = this.pending(await this.slot(accountId, input.backupId));
    const attempt = this.attemptOf(backup, input.uploadKey);
    const { partNumber, size } = input;
    const others = await this.ports.multipart.uploadBytes(attempt, partNumber);
    if (others === undefined) throw this.notOpen();
    if (others + size > this.options.maxArchiveBytes) throw this.tooLarge();
    const id = `${attempt}.${partNumber}`;
    // The part's earlier signature (if any) stops counting: its reservation and recorded size are replaced.
    await this.quotas.releaseUpload(id);
    const withdraw = async () => {
      await this.quotas.releaseUpload(id);
      await this.ports.multipart.setPartSize(backup.id, attempt, partNumber, 0);
    };
    try {
      await this.reserve(backup, id, size);
    } catch (error) {
      await withdraw();
      throw error;
    }
    await this.ports.multipart.setPartSize(backup.id, attempt, partNumber, size);
    const total = await this.ports.multipart.uploadBytes(attempt);
    if (total === undefined || total > this.options.maxArchiveBytes) {
      await withdraw();
      throw total === undefined ? this.notOpen() : this.tooLarge();
    }
    const request = await this.transfers.presignPart(input.uploadKey, input.uploadId, partNumber, size);
    return { type: 's3-presigned.part', partNumber, request: wire(request) };
  }

  private notOpen(): AppError {
    return AppError.validation([
      { path: 'payload.uploadKey', message: 'names no open upload (it was completed, aborted or refused): start a new one' },
    ]);
  }

  /**
   * Completes a multipart upload, then checks the object: it must exist with exactly the signed size, which the
   * client declares again (`size`). Anything else is refused and what the upload left is removed (its reservation
   * released). A completion repeated after it succeeded gives the same answer.
   */
  async complete(accountId: string, input: Static<typeof CompleteBody>['payload']): Promise<Record<string, unknown>> {
    const backup = await this.slot(accountId, input.backupId);
    const key = input.uploadKey;
    const attempt = this.attemptOf(backup, key);
    const answer = (size: number) => ({ type: 's3-presigned.complete', pathname: backup.blobPath, size });
    if (backup.status === 'UPLOADED' && backup.blobKey === key) return answer(backup.ciphertextSizeBytes ?? 0);
    this.pending(backup);
    const signed = await this.ports.multipart.uploadBytes(attempt);
    if (signed === undefined) throw this.notOpen();
    if (input.uploadId !== undefined) {
      const done = await this.completeMultipart(key, input.uploadId, input.parts);
      if (done === 'missing') {
        await this.discard(backup, attempt, key, input.uploadId);
        throw AppError.validation([
          { path: 'payload.uploadId', message: 'names no multipart upload of this uploadKey; the upload is removed' },
        ]);
      }
    }
    const stored = await this.blobs.stat(key);
    if (stored === null) {
      await this.discard(backup, attempt, key, input.uploadId);
      throw new AppError('ciphertext_size_mismatch', `Nothing was stored under the uploadKey; the upload is removed.`, {
        uploadedSizeBytes: 0,
        signedSizeBytes: signed,
      });
    }
    if (stored.size !== signed || input.size !== signed) {
      await this.discard(backup, attempt, key, input.uploadId);
      throw new AppError(
        'ciphertext_size_mismatch',
        `${stored.size} bytes were stored, ${signed} were signed and payload.size is ${input.size}; the upload is removed.`,
        { uploadedSizeBytes: stored.size, signedSizeBytes: signed },
      );
    }
    // UPLOADED now counts the stored bytes: the reservations end and the open upload is forgotten in the same commit
    // as the record's update (also when another change got there first).
    // With Object Lock the object is locked here, once checked (recordUpload): a client's bytes that are refused are never
    // locked, so they cannot stay in the bucket past the quota.
    await this.backups.recordUpload(backup, key, stored, attempt, attempt);
    return answer(stored.size);
  }

  /**
   * CompleteMultipartUpload with the listed parts (without a list: the parts the store holds, ListParts); 'missing'
   * when the store knows no such upload and holds no object from it.
   */
  private async completeMultipart(key: string, uploadId: string, listed: BlobPart[] | undefined): Promise<'done' | 'missing'> {
    try {
      const parts = listed ?? (await this.blobs.listParts(key, uploadId));
      if (parts.length === 0) throw AppError.validation([{ path: 'payload.parts', message: 'no part of this upload was stored' }]);
      await this.blobs.completeMultipart(key, uploadId, parts);
      return 'done';
    } catch (error) {
      if (error instanceof InvalidPartError) throw AppError.validation([{ path: 'payload.parts', message: error.message }]);
      if (!(error instanceof UploadNotFoundError)) throw error;
      // Completed before (the answer was lost, or the node died before recording it): every attempt has a key of its own.
      return (await this.blobs.stat(key)) === null ? 'missing' : 'done';
    }
  }

  /** Removes what an attempt left: its multipart upload, its object, its reservations, its record. */
  private async discard(backup: Backup, attempt: string, key: string, uploadId: string | undefined): Promise<void> {
    if (uploadId !== undefined) await this.blobs.abortMultipart(key, uploadId);
    if (backup.blobKey !== key) await this.blobs.delete(key);
    await this.quotas.releaseUpload(attempt);
    await this.ports.multipart.removeMultipartUpload(attempt);
  }

  async abort(accountId: string, input: Static<typeof AbortBody>['payload']): Promise<Record<string, unknown>> {
    const backup = await this.slot(accountId, input.backupId);
    const attempt = this.attemptOf(backup, input.uploadKey);
    if (backup.blobKey === input.uploadKey) {
      throw new AppError('invalid_backup_state', `The backup is ${backup.status}; this upload is its content.`, { status: backup.status });
    }
    await this.discard(backup, attempt, input.uploadKey, input.uploadId);
    return { type: 's3-presigned.abort' };
  }
}
