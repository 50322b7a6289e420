import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { isUuid } from '../domain/ids.js';
import {
  type BlobEntry,
  type BlobPart,
  type ByteRange,
  InvalidPartError,
  type MultipartBlobStore,
  type MultipartUpload,
  type PutOptions,
  type StoredBlob,
  type StoredPart,
  checkPartNumber,
  isSafeBlobKey,
  orderedParts,
  UploadNotFoundError,
} from './blob-store.js';

/** Read size of blob downloads (memory per download stays about twice this, bounded by socket backpressure). */
const READ_CHUNK_BYTES = 1024 * 1024;

/** Bytes written between two background flushes of a file being written (Writeback). */
export const WRITEBACK_BYTES = 4 * 1024 * 1024;

/**
 * Sends a file's pages to the disk while it is still being written, so that the fsync before the answer (the
 * durable upload of docs/api-rules.md#upload) finds little left to write: whatever passes through `tap` is counted,
 * and every `every` bytes an fdatasync starts in the background, one at a time, on a read-only handle of its own
 * (never the writer's descriptor, which the writer closes on its own schedule). It only paces the writeback; the
 * writer's own fsync at its end still makes the file durable. Without it the kernel keeps the whole body in the page
 * cache and that last fsync writes all of it while the client waits (BENCHMARKS.md, P1).
 */
export class Writeback {
  readonly tap: Transform;
  /** Background flushes started (for tests). */
  started = 0;
  private handle: fsp.FileHandle | null = null;
  private inFlight: Promise<void> | null = null;
  private pending = 0;

  constructor(
    private readonly file: string,
    private readonly every = WRITEBACK_BYTES,
  ) {
    this.tap = new Transform({
      transform: (chunk: Buffer, _encoding, callback) => {
        this.pending += chunk.length;
        if (this.pending >= this.every && this.inFlight === null) this.flush();
        callback(null, chunk);
      },
    });
  }

  private flush(): void {
    this.pending = 0;
    this.started += 1;
    this.inFlight = this.datasync()
      // A flush that fails (the writer has not created the file yet) is only a missed head start: the writer's fsync decides.
      .catch(() => undefined)
      .finally(() => {
        this.inFlight = null;
      });
  }

  private async datasync(): Promise<void> {
    this.handle ??= await fsp.open(this.file, 'r');
    await this.handle.datasync();
  }

  /** Waits for a flush in flight and closes the handle; call it once the pipeline through `tap` has settled. */
  async close(): Promise<void> {
    await this.inFlight;
    await this.handle?.close();
    this.handle = null;
  }
}

const PART_FILE = /^(\d+)\.([0-9a-f]{32})$/;

/** A temp file names its writer: `<pid>.<store>.<uuid>.<host>` (the store: a random id per FsBlobStore). */
const TEMP_FILE = /^(\d+)\.([0-9a-f]{16})\.[0-9a-f-]{36}\.(.+)$/;

/**
 * A temp file of another process that is alive, or on another host (whose processes cannot be asked), is removed
 * only once it has not been written to for this long, whatever the orphan grace: a live writer writes at least every
 * minute (the slow-client guard cuts an upload that sends less than 4 KiB/s over a minute, and a whole request ends
 * within 30 minutes).
 */
export const FOREIGN_TEMP_FLOOR_MS = 3_600_000;

/** Whether a process of this host is gone (a pid that another user's process holds is not). */
function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

const unversioned = (size: number): StoredBlob => ({ size, version: null, lockedUntil: null });

/**
 * Blobs as files under `<root>/blobs`, written to `<root>/tmp` first (flushed to the disk as they arrive: Writeback),
 * fsynced, then renamed into place.
 * Multipart uploads, emulated for the blob host (the MultipartBlobStore capability), live in `<root>/uploads/<uploadId>/`
 * (a `key` file and one `<part>.<md5>` file per part) until completion concatenates them through a temp file into place.
 */
export class FsBlobStore implements MultipartBlobStore {
  readonly kind = 'fs' as const;
  /** A file can always be removed by whoever holds the host: no Object Lock (docs/deploy.md#object-lock). */
  readonly objectLock = 'off' as const;
  private readonly blobDir: string;
  private readonly tmpDir: string;
  private readonly uploadDir: string;
  /** This store's part of its temp files' names, and the ones it is writing now (never swept). */
  private readonly id = randomBytes(8).toString('hex');
  private readonly host = os.hostname().replace(/[^A-Za-z0-9.-]/g, '_') || 'host';
  private readonly writing = new Set<string>();

  constructor(root: string) {
    this.blobDir = path.join(root, 'blobs');
    this.tmpDir = path.join(root, 'tmp');
    this.uploadDir = path.join(root, 'uploads');
    fs.mkdirSync(this.blobDir, { recursive: true });
    fs.mkdirSync(this.tmpDir, { recursive: true });
    fs.mkdirSync(this.uploadDir, { recursive: true });
    // Temp files a crash left behind are not removed here: another process (a server, a `coffer admin` command) may be
    // writing into tmp/ right now. The sweeper's removeIncomplete takes them once their writer is gone.
  }

  /** A new temp file's path, named after this store and process (TEMP_FILE), counted as being written until `done`. */
  private tempFile(): { temp: string; done: () => void } {
    const name = `${process.pid}.${this.id}.${randomUUID()}.${this.host}`;
    this.writing.add(name);
    return { temp: path.join(this.tmpDir, name), done: () => this.writing.delete(name) };
  }

  private pathOf(key: string): string {
    if (!isSafeBlobKey(key)) {
      throw new Error(`invalid blob key: ${key}`);
    }
    return path.join(this.blobDir, key);
  }

  async put(key: string, body: Readable, { signal }: PutOptions = {}): Promise<StoredBlob> {
    const target = this.pathOf(key);
    const { temp, done } = this.tempFile();
    const out = fs.createWriteStream(temp, { flush: true });
    const writeback = new Writeback(temp);
    try {
      await pipeline(body, writeback.tap, out, signal ? { signal } : {}).finally(() => writeback.close());
      await fsp.mkdir(path.dirname(target), { recursive: true });
      await fsp.rename(temp, target);
      await syncDirectory(path.dirname(target));
      const { size } = await fsp.stat(target);
      return unversioned(size);
    } catch (error) {
      await discard(out, temp);
      throw error;
    } finally {
      done();
    }
  }

  async stat(key: string): Promise<StoredBlob | null> {
    try {
      const { size } = await fsp.stat(this.pathOf(key));
      return unversioned(size);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const handle = await fsp.open(this.pathOf(key), 'r');
    // Reads of READ_CHUNK_BYTES, not the default 64 KiB: every chunk costs a read and a socket write, and those
    // calls are much of a download's server CPU, so the chunk is large (P2 in BENCHMARKS.md).
    return handle.createReadStream({ highWaterMark: READ_CHUNK_BYTES, ...(range ? { start: range.start, end: range.end } : {}) });
  }

  async delete(key: string): Promise<void> {
    await fsp.rm(this.pathOf(key), { force: true });
  }

  lock(): Promise<void> {
    return Promise.reject(new Error('the filesystem store has no Object Lock'));
  }

  async *list(prefix = ''): AsyncIterable<BlobEntry> {
    // Start the walk at the deepest directory the prefix names, so listing one backup stays cheap.
    const slash = prefix.lastIndexOf('/');
    const start = slash < 0 ? this.blobDir : path.join(this.blobDir, ...prefix.slice(0, slash).split('/'));
    let entries: fs.Dirent[];
    try {
      entries = await fsp.readdir(start, { recursive: true, withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    for (const entry of entries) {
      if (!entry.isFile()) continue;
      const file = path.join(entry.parentPath, entry.name);
      const key = path.relative(this.blobDir, file).split(path.sep).join('/');
      if (!key.startsWith(prefix)) continue;
      const stats = await fsp.stat(file).catch(() => null);
      if (stats) yield { key, size: stats.size, modifiedAt: stats.mtimeMs };
    }
  }

  async ping(): Promise<void> {
    await fsp.access(this.blobDir, fs.constants.W_OK);
  }

  // ---- multipart ----

  private async uploadPath(key: string, uploadId: string): Promise<string> {
    this.pathOf(key);
    if (!isUuid(uploadId)) throw new UploadNotFoundError();
    const dir = path.join(this.uploadDir, uploadId);
    const owner = await fsp.readFile(path.join(dir, 'key'), 'utf8').catch(() => null);
    if (owner !== key) throw new UploadNotFoundError();
    return dir;
  }

  async createMultipart(key: string): Promise<string> {
    this.pathOf(key);
    const uploadId = randomUUID();
    const dir = path.join(this.uploadDir, uploadId);
    await fsp.mkdir(dir);
    await fsp.writeFile(path.join(dir, 'key'), key);
    return uploadId;
  }

  async putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    options: PutOptions = {},
  ): Promise<{ etag: string; size: number }> {
    checkPartNumber(partNumber);
    const dir = await this.uploadPath(key, uploadId);
    const { temp, done } = this.tempFile();
    const md5 = createHash('md5');
    let size = 0;
    const hasher = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        md5.update(chunk);
        size += chunk.length;
        callback(null, chunk);
      },
    });
    const out = fs.createWriteStream(temp, { flush: true });
    const writeback = new Writeback(temp);
    try {
      await pipeline(body, hasher, writeback.tap, out, options.signal ? { signal: options.signal } : {}).finally(() => writeback.close());
      if (options.size !== undefined && options.size !== size) {
        throw new Error(`part ${partNumber} has ${size} bytes, ${options.size} were announced`);
      }
      const digest = md5.digest('hex');
      const name = `${partNumber}.${digest}`;
      await fsp.rename(temp, path.join(dir, name));
      // The part replaces any earlier one with its number (S3's rule): no superseded copy stays on disk.
      for (const other of await fsp.readdir(dir)) {
        if (other !== name && PART_FILE.exec(other)?.[1] === String(partNumber)) await fsp.rm(path.join(dir, other), { force: true });
      }
      return { etag: `"${digest}"`, size };
    } catch (error) {
      await discard(out, temp);
      throw error;
    } finally {
      done();
    }
  }

  async listParts(key: string, uploadId: string): Promise<StoredPart[]> {
    const dir = await this.uploadPath(key, uploadId);
    const parts: StoredPart[] = [];
    for (const name of await fsp.readdir(dir)) {
      const match = PART_FILE.exec(name);
      const stats = match && (await fsp.stat(path.join(dir, name)).catch(() => null));
      if (stats) parts.push({ partNumber: Number(match[1]), etag: `"${match[2]}"`, size: stats.size });
    }
    return parts;
  }

  async *listMultipart(prefix = ''): AsyncIterable<MultipartUpload> {
    for (const uploadId of await fsp.readdir(this.uploadDir)) {
      const file = path.join(this.uploadDir, uploadId, 'key');
      const [key, stats] = await Promise.all([fsp.readFile(file, 'utf8').catch(() => null), fsp.stat(file).catch(() => null)]);
      if (key !== null && stats && key.startsWith(prefix)) yield { key, uploadId, startedAt: stats.mtimeMs };
    }
  }

  async completeMultipart(key: string, uploadId: string, parts: readonly BlobPart[]): Promise<StoredBlob> {
    const dir = await this.uploadPath(key, uploadId);
    const stored = new Set((await fsp.readdir(dir)).filter((name) => PART_FILE.test(name)));
    const files = orderedParts(parts).map((part) => {
      const name = `${part.partNumber}.${part.etag.replace(/"/g, '').toLowerCase()}`;
      if (!stored.has(name)) throw new InvalidPartError(`part ${part.partNumber} with etag ${part.etag} was not uploaded`);
      return path.join(dir, name);
    });
    const target = this.pathOf(key);
    const { temp, done } = this.tempFile();
    const out = fs.createWriteStream(temp, { flush: true });
    const writeback = new Writeback(temp);
    try {
      await pipeline(
        async function* () {
          for (const file of files) yield* fs.createReadStream(file);
        },
        writeback.tap,
        out,
      ).finally(() => writeback.close());
      await fsp.mkdir(path.dirname(target), { recursive: true });
      await fsp.rename(temp, target);
      await syncDirectory(path.dirname(target));
    } catch (error) {
      await discard(out, temp);
      throw error;
    } finally {
      done();
    }
    await fsp.rm(dir, { recursive: true, force: true });
    const { size } = await fsp.stat(target);
    return unversioned(size);
  }

  async abortMultipart(key: string, uploadId: string): Promise<void> {
    try {
      await fsp.rm(await this.uploadPath(key, uploadId), { recursive: true, force: true });
    } catch (error) {
      if (!(error instanceof UploadNotFoundError)) throw error;
    }
  }

  /** Whether the writer of the temp file `name` is known to be gone. */
  private ownerGone(name: string): boolean {
    const match = TEMP_FILE.exec(name);
    if (!match) return false;
    const [, pid, store, host] = match;
    if (store === this.id) return !this.writing.has(name);
    return host === this.host && Number(pid) !== process.pid && processGone(Number(pid));
  }

  /**
   * Temp files older than `before` whose writer is gone: this store's own that it is not writing, and those of a
   * process of this host that has ended. Another live process's, another host's and unnamed ones are taken only once
   * also older than FOREIGN_TEMP_FLOOR_MS: a node starting on a shared directory must not take an upload in flight.
   * Multipart uploads (shared by the nodes, like an S3 bucket's) older than `before` go too.
   */
  async removeIncomplete(before: number): Promise<number> {
    let removed = 0;
    for (const name of await fsp.readdir(this.tmpDir)) {
      const file = path.join(this.tmpDir, name);
      const stats = await fsp.stat(file).catch(() => null);
      if (stats && stats.mtimeMs < Math.min(before, this.ownerGone(name) ? Infinity : Date.now() - FOREIGN_TEMP_FLOOR_MS)) {
        await fsp.rm(file, { recursive: true, force: true });
        removed += 1;
      }
    }
    for (const name of await fsp.readdir(this.uploadDir)) {
      const dir = path.join(this.uploadDir, name);
      // A directory's mtime moves whenever a part is renamed into it: it is the upload's last activity.
      const stats = await fsp.stat(dir).catch(() => null);
      if (stats && stats.mtimeMs < before) {
        await fsp.rm(dir, { recursive: true, force: true });
        removed += 1;
      }
    }
    return removed;
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Removes the temp file of a failed write once its stream has closed: the stream opens its file asynchronously, so a
 * source that fails first would otherwise see the file created after it was removed (a leftover in tmp/).
 */
async function discard(out: fs.WriteStream, temp: string): Promise<void> {
  if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()));
  await fsp.rm(temp, { force: true });
}
