/**
 * Ciphertext in any S3-compatible object store. Uploads stream through `@aws-sdk/lib-storage` (one PutObject
 * for small bodies, a multipart upload otherwise) with memory bounded by part size × queue size; a failed or
 * aborted upload aborts its multipart upload, so no parts are left behind. Objects appear only when complete
 * (S3 PutObject/CompleteMultipartUpload are atomic). Downloads stream, with an optional byte range.
 */
import { Readable, Transform, pipeline } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  GetObjectLockConfigurationCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  type ObjectLockMode as S3LockMode,
  PutObjectCommand,
  PutObjectRetentionCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import {
  type BlobEntry,
  BlobLockedError,
  type BlobPart,
  type ByteRange,
  InvalidPartError,
  type MultipartBlobStore,
  type MultipartUpload,
  type ObjectLockMode,
  type PutOptions,
  type StoredBlob,
  type StoredPart,
  checkPartNumber,
  orderedParts,
  UnsupportedOperationError,
  UploadNotFoundError,
} from './blob-store.js';

export interface S3BlobStoreOptions {
  bucket: string;
  /** Custom endpoint for S3-compatible stores (MinIO, Ceph, R2, …); omit for AWS. */
  endpoint?: string | null;
  region?: string;
  accessKeyId?: string | null;
  secretAccessKey?: string | null;
  /** Multipart part size in bytes (S3 minimum 5 MiB). */
  partSize?: number;
  /** Parts uploaded concurrently per upload; memory per upload ≈ (queueSize + 1) × partSize. */
  queueSize?: number;
  /** COFFER_S3_OBJECT_LOCK: off (default), or the mode objects are locked in; the bucket is then versioned. */
  objectLock?: ObjectLockMode;
}

/**
 * What the bucket says of Object Lock: on, off, or nothing (`reachable`: the store answered, refusing to tell, else it
 * could not be reached).
 */
export type BucketObjectLock = { state: 'enabled' | 'disabled' } | { state: 'unknown'; reachable: boolean; reason: string };

/**
 * The start check (docs/deploy.md#object-lock): what is wrong with COFFER_S3_OBJECT_LOCK=`setting` for a bucket in the
 * state `found`, or null. A store that cannot be reached is let through, as without Object Lock: writes then fail.
 */
export function objectLockProblem(setting: ObjectLockMode, bucket: string, found: BucketObjectLock): string | null {
  if (setting === 'off') {
    if (found.state !== 'enabled') return null;
    return (
      `the bucket ${bucket} has Object Lock enabled: set COFFER_S3_OBJECT_LOCK to governance or compliance ` +
      '(with off, every deleted backup would leave a delete marker and its old version in the bucket), or use a bucket without it'
    );
  }
  if (found.state !== 'unknown') {
    if (found.state === 'enabled') return null;
    return (
      `the bucket ${bucket} has no Object Lock: COFFER_S3_OBJECT_LOCK=${setting} needs a bucket created with Object Lock enabled ` +
      `(aws s3api create-bucket --bucket <name> --object-lock-enabled-for-bucket), or set COFFER_S3_OBJECT_LOCK=off`
    );
  }
  if (!found.reachable) return null;
  return (
    `cannot read the Object Lock configuration of the bucket ${bucket} (${found.reason}): ` +
    'the credentials need s3:GetBucketObjectLockConfiguration'
  );
}

const MIN_PART_SIZE = 5 * 1024 * 1024;
/** S3's largest single PutObject. */
const MAX_SINGLE_PUT = 5 * 1024 ** 3;

/** Builds the S3 client the way every S3-compatible store accepts (docs/deploy.md, S3 settings under Environment). */
export function createS3Client(options: S3BlobStoreOptions): S3Client {
  return new S3Client({
    region: options.region ?? 'us-east-1',
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    forcePathStyle: true,
    // Since 3.729 the SDK sends aws-chunked bodies with trailing checksums by default; many S3-compatible
    // stores then keep the framing as data. Only send checksums where the API requires them.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    ...(options.accessKeyId && options.secretAccessKey
      ? { credentials: { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey } }
      : {}),
  });
}

function errorName(error: unknown): string | undefined {
  if (error instanceof S3ServiceException) return error.name;
  return (error as { name?: string } | null)?.name;
}

function isNotFound(error: unknown): boolean {
  const name = errorName(error);
  const status = (error as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
  return name === 'NotFound' || name === 'NoSuchKey' || status === 404;
}

const isAccessDenied = (error: unknown) => errorName(error) === 'AccessDenied';

function translate(error: unknown): unknown {
  switch (errorName(error)) {
    case 'NotImplemented':
    case 'MethodNotAllowed':
      return new UnsupportedOperationError(`the S3 store does not implement this call: ${(error as Error).message}`);
    case 'NoSuchUpload':
      return new UploadNotFoundError();
    case 'InvalidPart':
    case 'InvalidPartOrder':
    case 'EntityTooSmall':
      return new InvalidPartError((error as Error).message);
    default:
      return error;
  }
}

/**
 * An error of a request addressed to one multipart upload (ListParts): NoSuchKey is also "no such upload" there.
 * Ceph's RADOS Gateway (16) answers ListParts of a finished, aborted or unknown upload with 404 NoSuchKey where
 * AWS answers NoSuchUpload.
 */
function translateUpload(error: unknown): unknown {
  return errorName(error) === 'NoSuchKey' ? new UploadNotFoundError() : translate(error);
}

/** `body` through a byte counter; a failure of either side destroys the other. */
function countBytes(body: Readable): { stream: Readable; size: () => number } {
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      size += chunk.length;
      callback(null, chunk);
    },
  });
  pipeline(body, counter, () => undefined);
  return { stream: counter, size: () => size };
}

/** Bytes [skip, skip + take) of `source`; the source is released as soon as they have passed. */
function slice(source: Readable, skip: number, take: number): Readable {
  let offset = 0;
  let done = false;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (done) return callback();
      const from = Math.max(0, skip - offset);
      const to = Math.min(chunk.length, skip + take - offset);
      offset += chunk.length;
      if (to > from) this.push(chunk.subarray(from, to));
      if (offset >= skip + take) {
        done = true;
        this.push(null);
        source.unpipe(this);
        source.destroy();
      }
      callback();
    },
  });
  source.on('error', (error) => out.destroy(error));
  return source.pipe(out);
}

export class S3BlobStore implements MultipartBlobStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly partSize: number;
  private readonly queueSize: number;
  readonly objectLock: ObjectLockMode;

  constructor(options: S3BlobStoreOptions, client?: S3Client) {
    this.client = client ?? createS3Client(options);
    this.bucket = options.bucket;
    this.partSize = Math.max(MIN_PART_SIZE, options.partSize ?? MIN_PART_SIZE);
    this.queueSize = Math.max(1, options.queueSize ?? 2);
    this.objectLock = options.objectLock ?? 'off';
  }

  /** The mode as S3 names it, or null when Object Lock is off. */
  private get lockMode(): S3LockMode | null {
    return this.objectLock === 'off' ? null : this.objectLock === 'governance' ? 'GOVERNANCE' : 'COMPLIANCE';
  }

  /** The lock parameters of a write (PutObject, CreateMultipartUpload): none when off or not asked for. */
  private lockParams(lockUntil: number | undefined) {
    const mode = this.lockMode;
    return mode === null || lockUntil === undefined ? {} : { ObjectLockMode: mode, ObjectLockRetainUntilDate: new Date(lockUntil) };
  }

  /**
   * Whether the bucket has Object Lock enabled (GetObjectLockConfiguration), for the start check. A store that answers
   * with an error of its own (no lock configuration, the call not implemented) has none; one that cannot be reached, or
   * refuses the credentials this call, tells nothing.
   */
  async bucketObjectLock(): Promise<BucketObjectLock> {
    try {
      const answer = await this.client.send(new GetObjectLockConfigurationCommand({ Bucket: this.bucket }));
      return { state: answer.ObjectLockConfiguration?.ObjectLockEnabled === 'Enabled' ? 'enabled' : 'disabled' };
    } catch (error) {
      const name = errorName(error);
      const reason = `${name ?? 'error'}: ${(error as Error).message}`;
      if (!(error instanceof S3ServiceException)) return { state: 'unknown', reachable: false, reason };
      if (name === 'AccessDenied' || name === 'NoSuchBucket') return { state: 'unknown', reachable: true, reason };
      return { state: 'disabled' };
    }
  }

  async put(key: string, body: Readable, { size, signal, lockUntil }: PutOptions = {}): Promise<StoredBlob> {
    if (size !== undefined && size <= MAX_SINGLE_PUT) return this.putKnownSize(key, body, size, signal, lockUntil);
    const counted = countBytes(body);
    // Aborting destroys the body: lib-storage then fails its own way, which aborts the multipart upload and
    // waits for that before rejecting (its own abortController would reject first and clean up later).
    const onAbort = () => counted.stream.destroy(signal?.reason instanceof Error ? signal.reason : new Error('upload aborted'));
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const upload = new Upload({
      client: this.client,
      params: {
        Bucket: this.bucket,
        Key: key,
        Body: counted.stream,
        ContentType: 'application/octet-stream',
        ...this.lockParams(lockUntil),
      },
      partSize: this.partSize,
      queueSize: this.queueSize,
      leavePartsOnError: false,
    });
    let version: string | undefined;
    try {
      ({ VersionId: version } = await upload.done());
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    if (this.lockMode === null) return { size: counted.size(), version: version ?? null, lockedUntil: null };
    // A multipart upload's lock parameters are not honoured by every store (Ceph 16 ignores them): ask the object.
    const stored = await this.stat(key, version);
    if (!stored) throw new Error(`S3 stored ${key} but does not show it`);
    return stored;
  }

  /**
   * One PutObject streaming a body of known length: nothing is buffered. lib-storage's multipart path holds
   * (queueSize + 1) × partSize per upload, so the server's memory would grow with every concurrent upload beyond what
   * P5 in BENCHMARKS.md allows. S3 stores nothing unless the whole body arrives.
   */
  private async putKnownSize(key: string, body: Readable, size: number, signal?: AbortSignal, lockUntil?: number): Promise<StoredBlob> {
    const counted = countBytes(body);
    // A body that fails mid-way must end the request to S3 too (piping alone would leave it hanging).
    const cancel = new AbortController();
    const onAbort = () => cancel.abort(signal?.reason);
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    counted.stream.once('error', (error) => cancel.abort(error));
    const lock = this.lockParams(lockUntil);
    let version: string | undefined;
    try {
      ({ VersionId: version } = await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: counted.stream,
          ContentLength: size,
          ContentType: 'application/octet-stream',
          ...lock,
        }),
        { abortSignal: cancel.signal },
      ));
    } catch (error) {
      // S3 keeps nothing of a PutObject cut short, but some S3-compatible stores (s3rver) keep what arrived.
      await this.delete(key).catch(() => undefined);
      throw counted.stream.errored ?? error;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    if (counted.stream.errored) {
      await this.delete(key).catch(() => undefined);
      throw counted.stream.errored;
    }
    if (counted.size() !== size) {
      await this.delete(key);
      throw new Error(`the body had ${counted.size()} bytes, ${size} were announced`);
    }
    // PutObject stores the object with its retention or not at all.
    return { size, version: version ?? null, lockedUntil: lock.ObjectLockRetainUntilDate?.getTime() ?? null };
  }

  async stat(key: string, version?: string | null): Promise<StoredBlob | null> {
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key, VersionId: version ?? undefined }));
      return {
        size: head.ContentLength ?? 0,
        version: head.VersionId ?? null,
        lockedUntil: head.ObjectLockMode ? (head.ObjectLockRetainUntilDate?.getTime() ?? null) : null,
      };
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }

  async get(key: string, range?: ByteRange, version?: string | null): Promise<Readable> {
    const object = await this.client.send(
      new GetObjectCommand({
        Bucket: this.bucket,
        Key: key,
        VersionId: version ?? undefined,
        ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
      }),
    );
    const raw = object.Body;
    let body: Readable;
    if (raw instanceof Readable) body = raw;
    else if (raw && 'transformToWebStream' in raw) {
      body = Readable.fromWeb(raw.transformToWebStream() as import('node:stream/web').ReadableStream);
    } else throw new Error(`S3 returned no body for ${key}`);
    if (!range) return body;
    // Some S3-compatible stores answer a range other than the one asked for (s3rver reads `bytes=0-0` as
    // the whole object) or ignore Range altogether: cut the asked range out of what came back.
    const served = /^bytes (\d+)-(\d+)\//.exec(object.ContentRange ?? '');
    const servedStart = served ? Number(served[1]) : 0;
    const servedLength = served ? Number(served[2]) - servedStart + 1 : object.ContentLength;
    const wanted = range.end - range.start + 1;
    if (servedStart === range.start && servedLength === wanted) return body;
    if (servedStart > range.start) {
      body.destroy();
      throw new Error(`S3 served bytes from ${servedStart} for a range starting at ${range.start}`);
    }
    return slice(body, range.start - servedStart, wanted);
  }

  async delete(key: string): Promise<void> {
    if (this.lockMode !== null) return this.deleteVersions(key);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  /**
   * A versioned bucket: a plain DeleteObject would only add a delete marker. Every version of exactly `key` and every
   * delete marker is removed by its id; versions still locked stay and BlobLockedError names the latest end.
   */
  private async deleteVersions(key: string): Promise<void> {
    let locked: BlobLockedError | null = null;
    for (const version of await this.versionsOf(key)) {
      try {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key, VersionId: version }));
      } catch (error) {
        if (isNotFound(error)) continue;
        if (!isAccessDenied(error)) throw error;
        const until = await this.stat(key, version).then(
          (stored) => stored?.lockedUntil ?? null,
          () => null,
        );
        // An AccessDenied on a version without a retention is the credentials' own limit, not a lock.
        if (until === null || until <= Date.now()) throw error;
        if (locked === null || until > (locked.lockedUntil ?? 0)) locked = new BlobLockedError(key, until);
      }
    }
    if (locked) throw locked;
  }

  /** The version ids of exactly `key` (objects and delete markers). */
  private async versionsOf(key: string): Promise<string[]> {
    const found: string[] = [];
    let keyMarker: string | undefined;
    let versionMarker: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectVersionsCommand({ Bucket: this.bucket, Prefix: key, KeyMarker: keyMarker, VersionIdMarker: versionMarker }),
      );
      for (const entry of [...(page.Versions ?? []), ...(page.DeleteMarkers ?? [])]) {
        if (entry.Key === key && entry.VersionId) found.push(entry.VersionId);
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      versionMarker = page.IsTruncated ? page.NextVersionIdMarker : undefined;
    } while (keyMarker !== undefined);
    return found;
  }

  async lock(key: string, version: string | null, until: number): Promise<void> {
    const mode = this.lockMode;
    if (mode === null) throw new Error('Object Lock is off (COFFER_S3_OBJECT_LOCK)');
    await this.client.send(
      new PutObjectRetentionCommand({
        Bucket: this.bucket,
        Key: key,
        VersionId: version ?? undefined,
        Retention: { Mode: mode, RetainUntilDate: new Date(until) },
      }),
    );
  }

  async *list(prefix = ''): AsyncIterable<BlobEntry> {
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix || undefined, ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) {
        if (object.Key === undefined) continue;
        yield { key: object.Key, size: object.Size ?? 0, modifiedAt: object.LastModified?.getTime() ?? 0 };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async ping(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
  }

  // ---- multipart (native S3 multipart uploads: parts may arrive on any node) ----

  async createMultipart(key: string, { lockUntil }: { lockUntil?: number } = {}): Promise<string> {
    const created = await this.client.send(
      new CreateMultipartUploadCommand({
        Bucket: this.bucket,
        Key: key,
        ContentType: 'application/octet-stream',
        ...this.lockParams(lockUntil),
      }),
    );
    if (!created.UploadId) throw new Error('S3 returned no UploadId');
    return created.UploadId;
  }

  async putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    options: PutOptions = {},
  ): Promise<{ etag: string; size: number }> {
    checkPartNumber(partNumber);
    // UploadPart needs a Content-Length: stream when it is known, otherwise collect the part first.
    let payload: Readable | Buffer = body;
    let size = options.size;
    if (size === undefined) {
      const chunks: Buffer[] = [];
      for await (const chunk of body) chunks.push(chunk as Buffer);
      payload = Buffer.concat(chunks);
      size = payload.length;
    }
    const counted = payload instanceof Readable ? countBytes(payload) : null;
    // A body that fails mid-part must end the request to S3 too (piping alone would leave it hanging).
    const cancel = new AbortController();
    const onAbort = () => cancel.abort(options.signal?.reason);
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    counted?.stream.once('error', (error) => cancel.abort(error));
    try {
      const result = await this.client.send(
        new UploadPartCommand({
          Bucket: this.bucket,
          Key: key,
          UploadId: uploadId,
          PartNumber: partNumber,
          Body: counted?.stream ?? payload,
          ContentLength: size,
        }),
        { abortSignal: cancel.signal },
      );
      if (counted?.stream.errored) throw counted.stream.errored;
      if (counted && counted.size() !== size) {
        throw new Error(`part ${partNumber} has ${counted.size()} bytes, ${size} were announced`);
      }
      if (!result.ETag) throw new Error(`S3 returned no ETag for part ${partNumber}`);
      return { etag: result.ETag, size };
    } catch (error) {
      throw translate(counted?.stream.errored ?? error);
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
  }

  async completeMultipart(key: string, uploadId: string, parts: readonly BlobPart[]): Promise<StoredBlob> {
    const ordered = orderedParts(parts);
    let version: string | undefined;
    try {
      ({ VersionId: version } = await this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: key,
          UploadId: uploadId,
          MultipartUpload: { Parts: ordered.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag })) },
        }),
      ));
    } catch (error) {
      const translated = translate(error);
      // Ceph's RADOS Gateway (16) answers a completion of an aborted or already completed upload with 500
      // InternalError ("This multipart completion is already in progress"; AWS: 404 NoSuchUpload). Ask ListParts
      // whether the upload still exists before passing a server error on.
      if (translated === error && errorName(error) === 'InternalError') {
        const gone = await this.listParts(key, uploadId).then(
          () => false,
          (listError: unknown) => listError instanceof UploadNotFoundError,
        );
        if (gone) throw new UploadNotFoundError();
      }
      throw translated;
    }
    const stat = await this.stat(key, version);
    if (!stat) throw new Error(`S3 completed ${key} but does not show it`);
    return stat;
  }

  async abortMultipart(key: string, uploadId: string): Promise<void> {
    try {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }));
    } catch (error) {
      if (!(translate(error) instanceof UploadNotFoundError) && !isNotFound(error)) throw error;
    }
  }

  async listParts(key: string, uploadId: string): Promise<StoredPart[]> {
    const parts: StoredPart[] = [];
    let marker: string | undefined;
    do {
      let page;
      try {
        page = await this.client.send(
          new ListPartsCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumberMarker: marker }),
        );
      } catch (error) {
        throw translateUpload(error);
      }
      for (const part of page.Parts ?? []) {
        if (part.PartNumber === undefined || !part.ETag) continue;
        parts.push({ partNumber: part.PartNumber, etag: part.ETag, size: part.Size ?? 0 });
      }
      marker = page.IsTruncated ? page.NextPartNumberMarker : undefined;
    } while (marker !== undefined);
    return parts;
  }

  async *listMultipart(prefix = ''): AsyncIterable<MultipartUpload> {
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    do {
      const page = await this.client
        .send(
          new ListMultipartUploadsCommand({
            Bucket: this.bucket,
            Prefix: prefix || undefined,
            KeyMarker: keyMarker,
            UploadIdMarker: uploadIdMarker,
          }),
        )
        .catch((error: unknown) => {
          throw translate(error);
        });
      for (const upload of page.Uploads ?? []) {
        if (!upload.Key || !upload.UploadId) continue;
        yield { key: upload.Key, uploadId: upload.UploadId, startedAt: upload.Initiated?.getTime() ?? 0 };
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      uploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
    } while (keyMarker !== undefined);
  }

  async removeIncomplete(before: number): Promise<number> {
    let removed = 0;
    for await (const upload of this.listMultipart()) {
      if (upload.startedAt >= before) continue;
      await this.abortMultipart(upload.key, upload.uploadId);
      removed += 1;
    }
    return removed;
  }
}
