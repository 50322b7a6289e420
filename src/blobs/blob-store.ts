/**
 * Ciphertext storage: one interface, one implementation per backend (filesystem embedded, S3 scale-out); multipart
 * uploads are a capability of its own (MultipartBlobStore), which both implementations have.
 */
import type { Readable } from 'node:stream';

export interface ByteRange {
  /** First byte, inclusive. */
  start: number;
  /** Last byte, inclusive. */
  end: number;
}

/** One stored blob, as listed for orphan sweeping. */
export interface BlobEntry {
  key: string;
  size: number;
  /** When the blob became visible (epoch ms, the storage's own clock). */
  modifiedAt: number;
}

/** A stored part of a multipart upload, as named when completing it. */
export interface BlobPart {
  partNumber: number;
  etag: string;
}

/** A stored part of a multipart upload, with its size. */
export interface StoredPart extends BlobPart {
  size: number;
}

/** A multipart upload that was neither completed nor aborted. */
export interface MultipartUpload {
  key: string;
  uploadId: string;
  /** When it was created (epoch ms, the storage's own clock). */
  startedAt: number;
}

/** The multipart upload id is unknown, already completed or aborted. */
export class UploadNotFoundError extends Error {
  constructor(message = 'No such multipart upload.') {
    super(message);
    this.name = 'UploadNotFoundError';
  }
}

/** The parts named on completion do not match the parts stored (missing part, wrong etag, bad order). */
/**
 * The store does not implement an optional call (an S3-compatible store without ListMultipartUploads, such as
 * s3rver, answers 501 NotImplemented or 405 MethodNotAllowed). Callers that can do without it degrade.
 */
export class UnsupportedOperationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedOperationError';
  }
}

export class InvalidPartError extends Error {
  constructor(message = 'The listed parts do not match the uploaded parts.') {
    super(message);
    this.name = 'InvalidPartError';
  }
}

const KEY = /^[A-Za-z0-9][A-Za-z0-9._-]*(\/[A-Za-z0-9][A-Za-z0-9._-]*)*$/;

/**
 * A key every store accepts: `/`-separated segments of letters, digits, `.`, `_` and `-`, none starting with a
 * dot or dash, so never `.` or `..`. Such a key is also a relative file path and a URL path as it stands.
 */
export function isSafeBlobKey(key: string): boolean {
  return KEY.test(key);
}

export const MAX_PART_NUMBER = 10_000;

export function checkPartNumber(partNumber: number): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER) {
    throw new InvalidPartError(`part numbers run from 1 to ${MAX_PART_NUMBER}`);
  }
}

/** The parts named on completion in part-number order; at least one, none twice (InvalidPartError otherwise). */
export function orderedParts(parts: readonly BlobPart[]): BlobPart[] {
  const ordered = [...parts].sort((a, b) => a.partNumber - b.partNumber);
  if (ordered.length === 0) throw new InvalidPartError('a multipart upload needs at least one part');
  for (let i = 1; i < ordered.length; i++) {
    if (ordered[i - 1]!.partNumber === ordered[i]!.partNumber) {
      throw new InvalidPartError(`part ${ordered[i]!.partNumber} is listed twice`);
    }
  }
  return ordered;
}

/**
 * How a body is stored: `size`, when the caller knows it (a Content-Length), is its exact byte count; `signal` aborts;
 * `lockUntil` (epoch ms), on a store with Object Lock, the retention the object is written with where the store takes
 * it with the write (what it answers in StoredBlob.lockedUntil).
 */
export interface PutOptions {
  size?: number;
  signal?: AbortSignal;
  lockUntil?: number;
}

/** The `lockUntil` of a write, from a lock end that may be null (Object Lock off). */
export const lockOption = (lockUntil: number | null): { lockUntil?: number } => (lockUntil === null ? {} : { lockUntil });

/** S3 Object Lock as the operator chose it (COFFER_S3_OBJECT_LOCK, docs/deploy.md#object-lock); always off on the fs store. */
export type ObjectLockMode = 'off' | 'governance' | 'compliance';

/** A stored object: its size, its version (null: the store keeps no versions) and the end of its retention (null: none). */
export interface StoredBlob {
  size: number;
  version: string | null;
  lockedUntil: number | null;
}

/** The store refuses to remove an object whose Object Lock retention has not ended (until `lockedUntil`, when known). */
export class BlobLockedError extends Error {
  constructor(
    readonly key: string,
    readonly lockedUntil: number | null,
  ) {
    super(`the object ${key} is locked${lockedUntil === null ? '' : ` until ${new Date(lockedUntil).toISOString()}`}`);
    this.name = 'BlobLockedError';
  }
}

export interface BlobStore {
  readonly kind: 'fs' | 's3';
  /** Object Lock: off, or the mode every backup object is locked in (a versioned bucket: objects are read by version). */
  readonly objectLock: ObjectLockMode;
  /**
   * Streams `body` into `key`. The blob becomes visible only once the whole body is stored durably;
   * when `body` fails or `options.signal` aborts, nothing is left behind and the error is rethrown.
   * `options.size` lets a store stream without holding parts in memory (S3: one streamed PutObject instead
   * of a multipart upload); a body of another length then fails.
   */
  put(key: string, body: Readable, options?: PutOptions): Promise<StoredBlob>;
  /** The blob (its `version` when given, else the current one), or null when it does not exist. */
  stat(key: string, version?: string | null): Promise<StoredBlob | null>;
  /** Streams the blob (its `version` when given), or the inclusive byte range of it. */
  get(key: string, range?: ByteRange, version?: string | null): Promise<Readable>;
  /**
   * Removes the blob; removing a missing blob is not an error. With Object Lock, every version of exactly this key
   * (and any delete marker) goes; a version whose retention has not ended: BlobLockedError, and the rest stays.
   */
  delete(key: string): Promise<void>;
  /** Object Lock: sets (or extends) the retention of one version of `key` until `until` in the store's mode. */
  lock(key: string, version: string | null, until: number): Promise<void>;
  /** Every stored (complete) blob whose key starts with `prefix`, in no particular order. */
  list(prefix?: string): AsyncIterable<BlobEntry>;
  /** Reachability probe for readiness checks. */
  ping(): Promise<void>;
  /**
   * Discards leftovers of uploads started before `before` (epoch ms) that never completed: temporary files, and
   * for a MultipartBlobStore its multipart uploads (S3 keeps their parts, invisible but billed, until aborted).
   * Returns how many.
   */
  removeIncomplete(before: number): Promise<number>;
}

/**
 * A BlobStore with S3-style multipart uploads, a capability only the blob host needs (the `blobhost-client`
 * protocol's multipart create/upload/complete): parts may arrive in any order, on any node; nothing is visible at
 * `key` until complete. S3 has it natively; the filesystem store emulates it.
 */
export interface MultipartBlobStore extends BlobStore {
  /** Starts a multipart upload into `key` (`lockUntil`: as PutOptions); returns its upload id. */
  createMultipart(key: string, options?: { lockUntil?: number }): Promise<string>;
  /**
   * Stores one part (1..10,000). A later part with the same number replaces it: the earlier copy is gone once
   * this returns. `size`, when known, is the exact byte count of `body`. A failed or aborted part leaves
   * nothing behind.
   */
  putPart(key: string, uploadId: string, partNumber: number, body: Readable, options?: PutOptions): Promise<{ etag: string; size: number }>;
  /** The parts stored for an upload (never a replaced one), in no particular order; UploadNotFoundError when unknown. */
  listParts(key: string, uploadId: string): Promise<StoredPart[]>;
  /** Every incomplete multipart upload whose key starts with `prefix`, in no particular order. */
  listMultipart(prefix?: string): AsyncIterable<MultipartUpload>;
  /** Assembles the listed parts (any order given; assembled by part number) into `key`, atomically. */
  completeMultipart(key: string, uploadId: string, parts: readonly BlobPart[]): Promise<StoredBlob>;
  /** Discards a multipart upload and its parts; an unknown upload is not an error. */
  abortMultipart(key: string, uploadId: string): Promise<void>;
}

/** A request the client makes itself, straight to the store: valid until `expiresAt` (epoch ms), never logged. */
export interface PresignedRequest {
  method: 'PUT' | 'GET';
  url: string;
  /** Headers the signature covers, which the client must send as given (the exact Content-Length of an upload). */
  headers: Record<string, string>;
  expiresAt: number;
}

/**
 * A store whose clients may move the bytes themselves (S3 with COFFER_S3_PRESIGNED): presigned requests for one
 * object's PUT of exactly `size` bytes, one part of a multipart upload of exactly `size` bytes, and a GET.
 */
export interface DirectTransfers {
  presignPut(key: string, size: number): Promise<PresignedRequest>;
  presignPart(key: string, uploadId: string, partNumber: number, size: number): Promise<PresignedRequest>;
  /** `version`: that version of the object (a versioned bucket), else the current one. */
  presignGet(key: string, version?: string | null): Promise<PresignedRequest>;
}
