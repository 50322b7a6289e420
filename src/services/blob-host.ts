/**
 * The blob host of the `blobhost-client` upload protocol (docs/upload-protocols.md): Coffer is itself the blob
 * host, so the stock `@vercel/blob/client` `upload()` works against it unmodified (configured by
 * `VERCEL_BLOB_API_URL=<COFFER_PUBLIC_URL>/blob` and an absolute `handleUploadUrl`).
 *
 * Client-token authenticated, under /blob: single PUT and multipart create/upload/complete, streamed into the
 * configured blob store (the one user of its MultipartBlobStore capability); when the bytes are stored the slot
 * becomes UPLOADED. Not part of the Coffer API: its errors are BlobApiErrors, in the blob API's shape. The client
 * tokens come from the handshake (./upload-handshake.ts), signed with the read-write token defined here.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import {
  InvalidPartError,
  lockOption,
  MAX_PART_NUMBER,
  type MultipartBlobStore,
  type StoredBlob,
  UploadNotFoundError,
} from '../blobs/blob-store.js';
import type { Clock } from '../domain/clock.js';
import { AppError } from '../domain/errors.js';
import { sameSecret } from '../lib/compare.js';
import { backupEtag } from '../domain/backups.js';
import { isUuid } from '../domain/ids.js';
import type { Backup } from '../domain/entities.js';
import type { Stores } from '../store/ports/stores.js';
import type { BackupService } from './backups.js';
import type { QuotaService } from './quotas.js';
import { limited, TooLarge } from './byte-limit.js';

export const RW_TOKEN_SETTING = 'blobhost.rw_token';
export const ALLOWED_CONTENT_TYPE = 'application/octet-stream';
const CLIENT_TOKEN_PREFIX = 'vercel_blob_client_';

/**
 * An error of the blob host API: `{"error":{"code","message"}}` with a code the client does not retry (only
 * unknown_error, service_unavailable and internal_server_error are retried); a quota refusal adds `details`.
 */
export class BlobApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: 'bad_request' | 'forbidden' | 'not_found' | 'upload_exceeds_quota',
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** What a client token carries (the fields of @vercel/blob's generateClientTokenFromReadWriteToken). */
export interface ClientTokenPayload {
  pathname: string;
  allowedContentTypes?: string[];
  maximumSizeInBytes?: number;
  validUntil: number;
  addRandomSuffix?: boolean;
  allowOverwrite?: boolean;
  onUploadCompleted?: { callbackUrl: string; tokenPayload?: string | null };
}

/** The result of a stored blob, as @vercel/blob's put()/upload() return it. */
export interface PutBlobResult {
  url: string;
  downloadUrl: string;
  pathname: string;
  contentType: string;
  contentDisposition: string;
  etag: string;
}

/** The body of x-mpu-action: complete. */
const PartList = Type.Array(Type.Object({ partNumber: Type.Integer(), etag: Type.String() }), {
  minItems: 1,
  maxItems: MAX_PART_NUMBER,
});

/** The client token's claims the blob host relies on (it signed the token; other fields pass through). */
const TokenClaims = Type.Object({ pathname: Type.String(), validUntil: Type.Number() });

export function generateReadWriteToken(): string {
  // The store id must not contain "_" (the client splits the token on it).
  return `vercel_blob_rw_${randomBytes(8).toString('hex')}_${randomBytes(32).toString('hex')}`;
}

/**
 * The read-write token shared by every node (created at first start, kept in the database): it signs the
 * client tokens (HMAC-SHA256) and the `blob.upload-completed` callbacks.
 */
export class ReadWriteToken {
  /** What every client token of this store starts with. */
  readonly clientTokenPrefix: string;

  constructor(private readonly secret: string) {
    const storeId = secret.split('_')[3];
    if (!secret.startsWith('vercel_blob_rw_') || !storeId) throw new Error('malformed blob read-write token');
    this.clientTokenPrefix = `${CLIENT_TOKEN_PREFIX}${storeId}_`;
  }

  static async open(ports: Pick<Stores, 'settings'>, clock: Clock): Promise<ReadWriteToken> {
    return new ReadWriteToken(await ports.settings.ensureSetting(RW_TOKEN_SETTING, generateReadWriteToken(), clock.now()));
  }

  /** Hex HMAC-SHA256 of `data`. */
  sign(data: string): string {
    return createHmac('sha256', this.secret).update(data).digest('hex');
  }

  signClientToken(payload: ClientTokenPayload): string {
    const encoded = Buffer.from(JSON.stringify(payload)).toString('base64');
    return `${this.clientTokenPrefix}${Buffer.from(`${this.sign(encoded)}.${encoded}`).toString('base64')}`;
  }
}

const PATHNAME = /^backups\/([0-9a-f-]{36})\/([0-9a-f-]{36})$/;

/** The account and backup a slot's `blobPath` names, if it has that shape. */
export function slotOf(pathname: string): { accountId: string; backupId: string } | undefined {
  const match = PATHNAME.exec(pathname);
  return match ? { accountId: match[1]!, backupId: match[2]! } : undefined;
}

export interface BlobHostOptions {
  readonly publicUrl: string;
  readonly maxArchiveBytes: number;
  readonly maxMultipartUploadsPerSlot: number;
}

/**
 * The slot limits (open uploads, bytes stored) are counted in the database (Store.addMultipartUpload,
 * putPartSize, …) rather than by listing the object store: one or two queries per part whatever the upload's
 * size, and no dependence on ListMultipartUploads/ListParts, which not every S3-compatible store has.
 */
export class BlobHostService {
  constructor(
    private readonly blobs: MultipartBlobStore,
    private readonly ports: Pick<Stores, 'multipart'>,
    private readonly backups: BackupService,
    private readonly quotas: QuotaService,
    private readonly clock: Clock,
    private readonly options: BlobHostOptions,
    private readonly token: ReadWriteToken,
  ) {}

  /**
   * Verifies the client token of a blob-host request for `pathname`: signature (constant time), expiry,
   * pathname, content type; returns the token payload and the slot, which must still take an upload.
   */
  async authorize(
    authorization: string | undefined,
    pathname: string | undefined,
    contentType: string | undefined,
    /** A completion of this blob key: a slot it already made UPLOADED passes too (the client's retry). */
    completing?: string,
  ): Promise<{ token: ClientTokenPayload; backup: Backup }> {
    const token = this.verifyClientToken(authorization);
    if (pathname === undefined || pathname !== token.pathname) {
      throw new BlobApiError(
        400,
        'bad_request',
        `The "pathname" ${JSON.stringify(pathname ?? '')} does not match the token payload ${JSON.stringify(token.pathname)}`,
      );
    }
    const type = (contentType ?? ALLOWED_CONTENT_TYPE).split(';')[0]!.trim().toLowerCase();
    const allowed = token.allowedContentTypes ?? [ALLOWED_CONTENT_TYPE];
    if (!allowed.some((entry) => entry === type || (entry.endsWith('/*') && type.startsWith(entry.slice(0, -1))))) {
      throw new BlobApiError(400, 'bad_request', `The "contentType" ${type} is not allowed (allowed: ${allowed.join(', ')})`);
    }
    const slot = slotOf(token.pathname);
    const backup = slot ? await this.backups.findVisible(slot.accountId, slot.backupId) : undefined;
    if (!backup) throw new BlobApiError(404, 'not_found', 'The backup slot of this token no longer exists.');
    const completed = completing !== undefined && backup.status === 'UPLOADED' && backup.blobKey === completing;
    if (backup.status !== 'PENDING_UPLOAD' && !completed) {
      throw new BlobApiError(400, 'bad_request', `The backup is ${backup.status}; it takes no upload.`);
    }
    return { token, backup };
  }

  verifyClientToken(authorization: string | undefined): ClientTokenPayload {
    const denied = () => new BlobApiError(403, 'forbidden', 'Access denied, please provide a valid token for this resource.');
    const match = /^Bearer\s+(\S+)$/i.exec(authorization ?? '');
    const prefix = this.token.clientTokenPrefix;
    if (!match || !match[1]!.startsWith(prefix)) throw denied();
    const decoded = Buffer.from(match[1]!.slice(prefix.length), 'base64').toString('utf8');
    const dot = decoded.indexOf('.');
    if (dot < 0) throw denied();
    const signature = decoded.slice(0, dot);
    const encoded = decoded.slice(dot + 1);
    if (!sameSecret(signature, this.token.sign(encoded))) throw denied();
    let payload: unknown;
    try {
      payload = JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'));
    } catch {
      throw denied();
    }
    if (!Value.Check(TokenClaims, payload)) throw denied();
    if (payload.validUntil <= this.clock.now()) throw new BlobApiError(403, 'forbidden', 'Token expired');
    return payload as ClientTokenPayload;
  }

  private limitOf(token: ClientTokenPayload): number {
    return Math.min(token.maximumSizeInBytes ?? Infinity, this.options.maxArchiveBytes);
  }

  private tooLarge(limit: number): BlobApiError {
    return new BlobApiError(413, 'bad_request', `the file length cannot be greater than ${limit} bytes`);
  }

  /** Refuses a declared length over the limit before any byte is read. */
  checkDeclaredLength(token: ClientTokenPayload, declared: number | undefined): void {
    const limit = this.limitOf(token);
    if (declared !== undefined && declared > limit) throw this.tooLarge(limit);
  }

  private result(backup: Backup, size: number): PutBlobResult {
    const url = `${this.options.publicUrl}/api/backups/${backup.id}/content`;
    return {
      url,
      downloadUrl: `${url}?download=1`,
      pathname: backup.blobPath,
      contentType: ALLOWED_CONTENT_TYPE,
      contentDisposition: `attachment; filename="backup-${backup.id}.bin"`,
      etag: backupEtag(backup.id, size),
    };
  }

  private async record(backup: Backup, blobKey: string, stored: StoredBlob): Promise<PutBlobResult> {
    try {
      await this.backups.recordUpload(backup, blobKey, stored);
    } catch (error) {
      if (error instanceof AppError) throw new BlobApiError(400, 'bad_request', `${error.message} It takes no upload.`);
      throw error;
    }
    return this.result(backup, stored.size);
  }

  /**
   * PUT /blob/?pathname=…: the whole ciphertext in one streamed body, held to the archive limit and the account's
   * quota (a declared length that does not fit is refused before a byte is stored, a body of unknown length is cut
   * where the quota ends, and the quota is checked again once the body is stored).
   */
  async putSingle(token: ClientTokenPayload, backup: Backup, body: Readable, declared?: number): Promise<PutBlobResult> {
    const limit = this.limitOf(token);
    const quota = await this.quotaRoom(backup, 0);
    if (declared !== undefined && declared > quota.room) throw this.quotaRefused(quota.quota!, quota.usage, declared);
    const blobKey = this.backups.newBlobKey(backup);
    const lockUntil = await this.backups.objectLockFor(backup);
    let stored: StoredBlob;
    try {
      stored = await this.blobs.put(blobKey, limited(body, Math.max(0, Math.min(limit, quota.room))), lockOption(lockUntil));
    } catch (error) {
      if (error instanceof TooLarge) throw quota.room < limit ? this.quotaRefused(quota.quota!, quota.usage) : this.tooLarge(limit);
      throw error;
    }
    // Without a quota there is nothing to check again (the common case: no second query).
    const after = quota.quota === null ? undefined : await this.quotaRoom(backup, 0);
    if (after && stored.size > after.room) {
      await this.backups.discardBlob(blobKey);
      throw this.quotaRefused(after.quota!, after.usage, stored.size);
    }
    return this.record(backup, blobKey, stored);
  }

  /**
   * x-mpu-action: create. The returned key names this attempt's blob; the client echoes it on every part.
   * A slot has at most `maxMultipartUploadsPerSlot` uploads open; one created alongside others (on any node)
   * is counted once it exists, and withdrawn when it made one too many.
   */
  async createMultipart(backup: Backup): Promise<{ key: string; uploadId: string }> {
    const tooMany = () =>
      new BlobApiError(
        400,
        'bad_request',
        `This backup slot already has ${this.options.maxMultipartUploadsPerSlot} multipart uploads in progress.`,
      );
    if ((await this.ports.multipart.countMultipartUploads(backup.id)) >= this.options.maxMultipartUploadsPerSlot) throw tooMany();
    const key = this.backups.newBlobKey(backup);
    const uploadId = await this.blobs.createMultipart(key, lockOption(await this.backups.objectLockFor(backup)));
    if ((await this.ports.multipart.addMultipartUpload(backup.id, uploadId, this.clock.now())) > this.options.maxMultipartUploadsPerSlot) {
      await this.discard(key, uploadId);
      throw tooMany();
    }
    return { key, uploadId };
  }

  /** Aborts a multipart upload and forgets its parts. */
  private async discard(key: string, uploadId: string): Promise<void> {
    await this.blobs.abortMultipart(key, uploadId);
    await this.ports.multipart.removeMultipartUpload(uploadId);
  }

  private checkKey(backup: Backup, key: string | undefined, uploadId: string | undefined): { key: string; uploadId: string } {
    const name = key?.startsWith(`${backup.blobPath}/`) ? key.slice(backup.blobPath.length + 1) : '';
    if (!/^[0-9a-f-]{36}\.bin$/.test(name) || !isUuid(name.slice(0, 36)) || !uploadId) {
      throw new BlobApiError(400, 'bad_request', 'x-mpu-key and x-mpu-upload-id must come from the create step of this upload');
    }
    return { key: key!, uploadId };
  }

  /**
   * What the account may still store (bytes; Infinity without a quota): its quota less its stored bytes (the
   * database's count, docs/api-rules.md#quota) and `pending`, the bytes this slot's open multipart uploads hold.
   */
  private async quotaRoom(backup: Backup, pending: number): Promise<{ quota: number | null; usage: number; room: number }> {
    const status = await this.quotas.quota(backup.accountId);
    const quota = status?.quota ?? null;
    const usage = (status?.usage ?? 0) + pending;
    return { quota, usage, room: quota === null ? Infinity : quota - usage };
  }

  private quotaRefused(quota: number, usage: number, uploadBytes?: number): BlobApiError {
    const refused = this.quotas.quotaRefused('upload', quota, usage, uploadBytes);
    return new BlobApiError(413, 'upload_exceeds_quota', refused.message, refused.details);
  }

  /**
   * x-mpu-action: upload. One part, streamed; parts may arrive in any order and on any node. The archive limit
   * holds while parts arrive, for what the slot's open uploads store together (a part sent again counts once;
   * the running total is kept in the database): a part that would take them past it is refused with 413 and
   * its upload discarded. So does the account's quota: a part whose declared length does not fit is refused
   * before it is stored (413 upload_exceeds_quota), one of unknown length is cut where the quota ends, and parts
   * stored at the same time (on any node) are checked together once stored.
   */
  async uploadPart(
    token: ClientTokenPayload,
    backup: Backup,
    headers: { key?: string; uploadId?: string; partNumber?: string; contentLength?: number },
    body: Readable,
  ): Promise<{ etag: string }> {
    const { key, uploadId } = this.checkKey(backup, headers.key, headers.uploadId);
    const partNumber = Number(headers.partNumber);
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER) {
      throw new BlobApiError(400, 'bad_request', `x-mpu-part-number must be a whole number from 1 to ${MAX_PART_NUMBER}`);
    }
    const limit = this.limitOf(token);
    try {
      const stored = await this.ports.multipart.slotBytes(backup.id, { uploadId, partNumber });
      const room = limit - stored;
      if (headers.contentLength !== undefined && headers.contentLength > room) throw new TooLarge();
      const quota = await this.quotaRoom(backup, stored);
      if (headers.contentLength !== undefined && headers.contentLength > quota.room)
        throw this.quotaRefused(quota.quota!, quota.usage, headers.contentLength);
      let part: { etag: string; size: number };
      try {
        const cap = Math.max(0, Math.min(room, quota.room));
        part = await this.blobs.putPart(key, uploadId, partNumber, limited(body, cap), { size: headers.contentLength });
      } catch (error) {
        if (error instanceof TooLarge && quota.room < room) throw this.quotaRefused(quota.quota!, quota.usage);
        throw error;
      }
      // Parts sent at the same time (on any node) each saw room for themselves: their sum is checked once stored.
      const total = await this.ports.multipart.putPartSize(backup.id, uploadId, partNumber, part.size);
      if (total > limit) throw new TooLarge();
      const after = quota.quota === null ? undefined : await this.quotaRoom(backup, total);
      if (after && after.room < 0) throw this.quotaRefused(after.quota!, after.usage - part.size, part.size);
      return { etag: part.etag };
    } catch (error) {
      if (error instanceof TooLarge || (error instanceof BlobApiError && error.code === 'upload_exceeds_quota'))
        await this.discard(key, uploadId);
      throw this.translate(error, limit);
    }
  }

  /** x-mpu-action: complete, body `[{partNumber, etag}]` in any order. */
  async completeMultipart(
    token: ClientTokenPayload,
    backup: Backup,
    headers: { key?: string; uploadId?: string },
    parts: unknown,
  ): Promise<PutBlobResult> {
    const { key, uploadId } = this.checkKey(backup, headers.key, headers.uploadId);
    if (!Value.Check(PartList, parts)) {
      throw new BlobApiError(400, 'bad_request', 'The body must be a JSON array of {partNumber, etag}.');
    }
    // The client's retry of a completion that succeeded (its answer was lost): the same answer again.
    if (backup.status === 'UPLOADED' && backup.blobKey === key) return this.result(backup, backup.ciphertextSizeBytes ?? 0);
    const limit = this.limitOf(token);
    let stored: StoredBlob;
    try {
      stored = await this.blobs.completeMultipart(key, uploadId, parts);
    } catch (error) {
      // The store completed it before (the node died or the answer was lost before it was recorded): every
      // upload attempt has a key of its own, so an object under the key is this upload's.
      const found = error instanceof UploadNotFoundError ? await this.blobs.stat(key) : null;
      if (!found) throw this.translate(error, limit);
      stored = found;
    }
    await this.ports.multipart.removeMultipartUpload(uploadId);
    if (stored.size > limit) {
      await this.backups.discardBlob(key);
      throw this.tooLarge(limit);
    }
    return this.record(backup, key, stored);
  }

  private translate(error: unknown, limit: number): unknown {
    if (error instanceof TooLarge) return this.tooLarge(limit);
    if (error instanceof UploadNotFoundError) return new BlobApiError(404, 'not_found', 'No such multipart upload.');
    if (error instanceof InvalidPartError) return new BlobApiError(400, 'bad_request', error.message);
    return error;
  }
}
