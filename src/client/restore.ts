/**
 * `coffer restore`, as a library: download (resumed with Range/If-Range when the connection breaks) →
 * secretstream decrypt (every chunk authenticated, TAG_FINAL required) → gunzip or zstd → SHA-256 → checked tar
 * extraction into a private staging directory inside the target. Only when the final tag, the plaintext size
 * and the plaintext SHA-256 all match the sealed metadata is the staged tree moved into place; on any failure
 * the staging directory (and a target directory this restore created) is removed: nothing is written.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Meter } from './archive.js';
import { closed, dropSpareWorkers, extractInto, extractRaw, placeTree, prestartExtraction, type ExtractResult } from './extract.js';
import { decompressStages } from './compression.js';
import {
  DecryptStream,
  deriveRecipient,
  IntegrityError,
  newKey,
  openMetadata,
  sealDek,
  unwrapDek,
  wipe,
  type BackupMetadata,
} from './envelope.js';
import type { SkippedEntry } from './envelope-format.js';
import { includeMatcher } from './select.js';
import { fsReason } from './fs-errors.js';
import { CofferNetworkError, type BackupDetailBody, type CofferClient } from './sdk.js';
import type { DrillCheck } from './attestation.js';

export class TargetNotEmptyError extends Error {
  override readonly name = 'TargetNotEmptyError';
}

export class BackupNotRestorableError extends Error {
  override readonly name = 'BackupNotRestorableError';
}

export interface DownloadOptions {
  signal?: AbortSignal;
  /** Consecutive failures without progress before giving up. */
  retries?: number;
  retryDelayMs?: number;
  onBytes?: (received: number, total: number) => void;
  /** Called for each resumed request (offset it resumed from). */
  onResume?: (from: number) => void;
}

/**
 * The ciphertext of a backup as a stream of chunks. A broken connection (or a body that ends short of the
 * announced length) is resumed with `Range: bytes=<received>-` and `If-Range: <etag>`; a server that ignores
 * the range answers 200 and the bytes already consumed are skipped, unless the ETag changed.
 */
export async function* downloadCiphertext(client: CofferClient, backupId: string, options: DownloadOptions = {}): AsyncGenerator<Buffer> {
  const { signal } = options;
  const retries = options.retries ?? 5;
  const delay = options.retryDelayMs ?? 250;
  let received = 0;
  let total = NaN;
  let etag: string | undefined;
  let failures = 0;
  const failed = async (cause: unknown) => {
    if (signal?.aborted) throw cause;
    failures += 1;
    if (failures > retries) {
      throw new CofferNetworkError(`the download broke off ${failures} times in a row; try again later`, { cause });
    }
    await sleep(delay * failures, undefined, { signal });
  };

  for (;;) {
    const resuming = received > 0;
    if (resuming) options.onResume?.(received);
    let response;
    try {
      response = await client.openBackupContent(backupId, { from: received, etag, signal });
    } catch (error) {
      if (!(error instanceof CofferNetworkError)) throw error;
      await failed(error);
      continue;
    }
    let skip = 0;
    if (!resuming) {
      total = response.totalBytes;
      etag = response.etag;
    } else if (response.status === 206) {
      if (response.start !== received || response.totalBytes !== total) {
        await response.body.cancel();
        throw new CofferNetworkError(`the server resumed at byte ${response.start} instead of ${received}`);
      }
    } else {
      if (response.etag !== etag || response.totalBytes !== total) {
        await response.body.cancel();
        throw new IntegrityError('the backup content changed while it was being downloaded');
      }
      skip = received;
    }

    const reader = response.body.getReader();
    let broke: unknown;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        let chunk = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
        if (skip > 0) {
          if (chunk.length <= skip) {
            skip -= chunk.length;
            continue;
          }
          chunk = chunk.subarray(skip);
          skip = 0;
        }
        received += chunk.length;
        failures = 0;
        options.onBytes?.(received, total);
        yield chunk;
      }
    } catch (error) {
      broke = error;
    } finally {
      await reader.cancel().catch(() => undefined);
    }
    if (broke === undefined && (!Number.isFinite(total) || received >= total)) return;
    await failed(broke ?? new Error(`the body ended after ${received} of ${total} bytes`));
  }
}

export type RestoreEvent =
  | { type: 'verified-keys'; metadata: BackupMetadata }
  | { type: 'progress'; received: number; total: number }
  | { type: 'resumed'; from: number };

/** A READY backup whose keys and sealed metadata opened: the caller wipes `dek`. */
export interface OpenedBackup {
  backupId: string;
  detail: BackupDetailBody;
  metadata: BackupMetadata;
  dek: Buffer;
}

/**
 * Fetches a backup's record and opens its data key and sealed metadata, for the id asked for (client.getBackup
 * refuses an answer about another backup; the associated data binds the key and metadata to the id).
 */
export async function openBackup(
  client: CofferClient,
  masterKey: Buffer | Promise<Buffer>,
  backupId: string,
  signal?: AbortSignal,
  /** Work that does not need the key, run (once the record is in) only while the key is still being derived. */
  whileDeriving?: () => void,
): Promise<OpenedBackup> {
  // A key still being derived (a promise) is awaited with the record, so neither failure goes unobserved.
  const record = client.getBackup(backupId, signal);
  if (masterKey instanceof Promise) void warmWhileDeriving(record, masterKey, whileDeriving);
  const [detail, key] = await Promise.all([record, masterKey]);
  if (detail.status !== 'READY') {
    throw new BackupNotRestorableError(`backup ${backupId} is ${detail.status}; only READY backups can be read`);
  }
  const dek = unwrapDek(key, backupId, detail);
  try {
    return { backupId, detail, metadata: openMetadata(dek, backupId, detail), dek };
  } catch (error) {
    wipe(dek);
    throw error;
  }
}

/**
 * Opening the data key, once the master key is there, runs X-Wing in pure JavaScript (noble): the recipient's key
 * pair expanded from its seed (once for the key-pin check, once in unwrapDek) and a decapsulation. The first run in a
 * process is several times slower than the next (the JIT compiles it, the base point's tables are built), time the
 * restore should not spend waiting. So while Argon2id runs (in libsodium's thread, the main thread mostly idle), the
 * same code runs once on a throwaway key, sealed and opened, which leaves nothing but compiled code and those tables.
 * It waits for the backup's record (the account was asked first, so its answer has started the derivation by then)
 * and is skipped when the key came first.
 */
async function warmWhileDeriving(record: Promise<unknown>, masterKey: Promise<unknown>, also?: () => void): Promise<void> {
  let derived = false;
  masterKey.then(
    () => (derived = true),
    () => (derived = true),
  );
  // Not after a failed record: openBackup has already failed, and whatever `also` starts would outlive it.
  const recordIn = await record.then(
    () => true,
    () => false,
  );
  if (!recordIn) return;
  await new Promise<void>((resolve) => setImmediate(resolve));
  if (derived) return;
  also?.();
  const key = newKey();
  const dek = newKey();
  try {
    const throwaway = '00000000-0000-0000-0000-000000000000';
    wipe(unwrapDek(key, throwaway, sealDek(deriveRecipient(key), throwaway, dek)));
  } catch {
    // only a warm-up: the real key's opening reports its own failures
  } finally {
    wipe(key);
    wipe(dek);
  }
}

/** How much ciphertext a restore downloads ahead while the key is still being derived. */
export const PREFETCH_BYTES = 64 * 1024 * 1024;

/**
 * Starts downloading a backup's ciphertext and holds up to `aheadBytes` of it until it is read (readBackup's
 * `ciphertext`), so the transfer overlaps the key derivation; nothing is decrypted or written before then. A failure
 * is kept for the reader (or dropped with the stream when it is destroyed unread).
 */
export function prefetchCiphertext(
  client: CofferClient,
  backupId: string,
  options: { signal?: AbortSignal; retries?: number; onEvent?: (event: RestoreEvent) => void; aheadBytes: number },
): Readable {
  const emit = options.onEvent ?? (() => undefined);
  const chunks = downloadCiphertext(client, backupId, {
    signal: options.signal,
    retries: options.retries,
    onBytes: (received, total) => emit({ type: 'progress', received, total }),
    onResume: (from) => emit({ type: 'resumed', from }),
  });
  // Without a look-ahead the stream pulls as it is read (Readable.from's own buffering, as before the prefetch).
  const ahead = options.aheadBytes > 0;
  const stream = ahead ? Readable.from(chunks, { objectMode: false, highWaterMark: options.aheadBytes }) : Readable.from(chunks);
  stream.on('error', () => undefined); // kept in stream.errored, which the reader's pipeline reports
  if (ahead) stream.read(0);
  return stream;
}

export interface ReadOptions {
  client: CofferClient;
  /** Where the plaintext archive goes (it is unconfirmed until readBackup resolves). */
  sink: Writable;
  signal?: AbortSignal;
  retries?: number;
  onEvent?: (event: RestoreEvent) => void;
  /** false: decompress zstd with the pure-JavaScript decoder even where node:zlib has zstd. */
  nativeZstd?: boolean;
  /** Also hash the ciphertext (coffer verify checks it against the next link of a history chain). */
  hashCiphertext?: boolean;
  /** The download, already under way (prefetchCiphertext); by default readBackup starts it. */
  ciphertext?: Readable;
  /** Told which check a failure came from (a restore drill records the checks that passed before it). */
  onFailedCheck?: (check: DrillCheck) => void;
}

/**
 * Tells `report` which check failed: the stream that emits the first error is the one that failed (pipeline then
 * destroys the others with that same error, later: a download that breaks off is no decompression failure).
 */
function watchChecks(streams: [NodeJS.EventEmitter, DrillCheck][], report: (check: DrillCheck) => void): void {
  for (const [stream, check] of streams) stream.once('error', () => report(check));
}

/** What a full read established: every chunk authenticated, the final tag seen, sizes and SHA-256 as sealed. */
export interface ReadResult {
  ciphertextBytes: number;
  plaintextBytes: number;
  plaintextSha256: string;
  /** With hashCiphertext: the SHA-256 of the downloaded ciphertext (hex). */
  ciphertextSha256?: string;
}

/**
 * Downloads a backup (resumed when the connection breaks), decrypts and authenticates every chunk (TAG_FINAL
 * required), decompresses it as its metadata says and hashes the plaintext on its way to `sink`; then checks the
 * ciphertext size, the plaintext size and the plaintext SHA-256 against the sealed metadata. Any mismatch, a chunk
 * that does not verify or a stream that does not decompress is an IntegrityError.
 */
export async function readBackup(opened: OpenedBackup, options: ReadOptions): Promise<ReadResult> {
  const { metadata, dek, backupId } = opened;
  const cipher = new Meter({ hash: options.hashCiphertext === true });
  const plain = new Meter({ hash: true });
  // One frame or member, nothing after it, at most the sealed size (compression-core.ts): the rest is never decoded.
  const stages = decompressStages(metadata.compression, metadata.plaintextSizeBytes, { native: options.nativeZstd });
  const source = options.ciphertext ?? prefetchCiphertext(options.client, backupId, { ...options, aheadBytes: 0 });
  const decrypt = new DecryptStream(dek);
  let failedAt: DrillCheck | undefined;
  const failed = (check: DrillCheck) => {
    if (failedAt !== undefined) return;
    failedAt = check;
    options.onFailedCheck?.(check);
  };
  if (source.errored) failed('download'); // a prefetched download that failed before it was read
  watchChecks(
    [
      [source, 'download'],
      [cipher, 'download'],
      [decrypt, 'decrypt'],
      ...stages.map((stage): [NodeJS.EventEmitter, DrillCheck] => [stage, 'decompress']),
      [plain, 'decompress'],
      [options.sink, 'archive'],
    ],
    failed,
  );
  await pipeline([source, cipher, decrypt, ...stages, plain, options.sink], { signal: options.signal }).catch((error: Error) => {
    if (failedAt === 'decompress' && !(error instanceof IntegrityError)) {
      throw new IntegrityError(`the decrypted archive is not valid ${metadata.compression}: ${error.message}`);
    }
    throw error;
  });
  const sha256 = plain.digest();
  if (cipher.bytes !== metadata.ciphertextSizeBytes) {
    failed('sizes');
    throw new IntegrityError(`the backup has ${cipher.bytes} encrypted bytes; its sealed metadata says ${metadata.ciphertextSizeBytes}`);
  }
  if (plain.bytes !== metadata.plaintextSizeBytes || sha256 !== metadata.plaintextSha256) {
    failed(plain.bytes !== metadata.plaintextSizeBytes ? 'sizes' : 'sha256');
    throw new IntegrityError(
      `the restored archive does not match its metadata (SHA-256 ${sha256}, ${plain.bytes} bytes; ` +
        `expected ${metadata.plaintextSha256}, ${metadata.plaintextSizeBytes} bytes)`,
    );
  }
  return {
    ciphertextBytes: cipher.bytes,
    plaintextBytes: plain.bytes,
    plaintextSha256: sha256,
    ...(options.hashCiphertext ? { ciphertextSha256: cipher.digest() } : {}),
  };
}

export interface RestoreOptions {
  client: CofferClient;
  /** The master key, or its derivation under way: the download starts meanwhile (up to PREFETCH_BYTES ahead). */
  masterKey: Buffer | Promise<Buffer>;
  backupId: string;
  target: string;
  /** Restore into a non-empty directory (merging, replacing what the backup holds). */
  force?: boolean;
  /** gitignore-style patterns: restore only the entries they match (and what lies below a matched directory). */
  include?: readonly string[];
  signal?: AbortSignal;
  retries?: number;
  onEvent?: (event: RestoreEvent) => void;
}

export interface RestoreResult {
  detail: BackupDetailBody;
  metadata: BackupMetadata;
  entries: number;
  target: string;
  /** Selected entries that could not be restored (a partial restore's hard link to a file it leaves out). */
  skipped: SkippedEntry[];
}

export class NothingSelectedError extends Error {
  override readonly name = 'NothingSelectedError';
}

/** Fails early (before any network work) on a target that is a file, or a non-empty directory without force. */
export async function checkTarget(target: string, force: boolean): Promise<void> {
  const stat = await fsp.stat(target).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (!stat) return;
  if (!stat.isDirectory()) throw new TargetNotEmptyError(`${target} exists and is not a directory`);
  if (!force && (await fsp.readdir(target)).length > 0) {
    throw new TargetNotEmptyError(`${target} is not empty; choose an empty or new directory, or pass --force`);
  }
}

export async function runRestore(options: RestoreOptions): Promise<RestoreResult> {
  const { client, masterKey, backupId, signal } = options;
  const emit = options.onEvent ?? (() => undefined);
  const target = path.resolve(options.target);
  const select = includeMatcher(options.include);
  const nothing = () =>
    new NothingSelectedError(`no entry of backup ${backupId} matches --include ${options.include!.join(' ')}: nothing was restored`);
  await checkTarget(target, !!options.force);

  const ciphertext = prefetchCiphertext(client, backupId, { signal, retries: options.retries, onEvent: emit, aheadBytes: PREFETCH_BYTES });
  // The extraction's threads start while the key is derived (dropped below if no extraction takes them).
  const opened = await openBackup(client, masterKey, backupId, signal, () => prestartExtraction()).catch((error: unknown) => {
    ciphertext.destroy();
    dropSpareWorkers();
    throw error;
  });
  try {
    const { detail, metadata } = opened;
    emit({ type: 'verified-keys', metadata });
    if (metadata.archive === 'raw' && select && !select(metadata.name, false)) throw nothing();

    const created = await createTarget(target);
    const staging = await fsp.mkdtemp(path.join(target, '.coffer-restore-'));
    let done = false;
    let sink: (Writable & ExtractResult) | undefined;
    try {
      sink =
        metadata.archive === 'raw' ? extractRaw(staging, metadata.name, new Date(metadata.createdAt)) : extractInto(staging, { select });
      await readBackup(opened, { client, sink, signal, ciphertext });
      if (select && sink.entries === 0) throw nothing();
      await placeTree(staging, target, !!options.force, sink.directories);
      done = true;
      return { detail, metadata, entries: sink.entries, target, skipped: sink.skipped };
    } finally {
      if (!done) {
        if (sink) await closed(sink); // no creation of the extractor may still be on its way into staging
        await fsp.rm(staging, { recursive: true, force: true }).catch(() => undefined);
        if (created) await fsp.rm(created, { recursive: true, force: true }).catch(() => undefined);
      }
    }
  } finally {
    ciphertext.destroy(); // unread when the restore stopped before reading it
    dropSpareWorkers();
    wipe(opened.dek);
  }
}

export class RestoreTargetError extends Error {
  override readonly name = 'RestoreTargetError';
}

/**
 * Creates the target directory and its missing parents, one level at a time, and returns the first one it
 * created. Not `mkdir -p` (fs.mkdir's `recursive`), which loops forever where a directory cannot be created
 * though its parent exists (under /proc, say): here that is a clear error naming the path.
 */
async function createTarget(target: string): Promise<string | undefined> {
  const missing: string[] = [];
  for (let dir = target; ; dir = path.dirname(dir)) {
    const stat = await fsp.stat(dir).catch(() => undefined);
    if (stat?.isDirectory()) break;
    if (stat) throw new RestoreTargetError(`cannot create the restore target ${target}: ${dir} is not a directory`);
    missing.unshift(dir);
    if (path.dirname(dir) === dir) break;
  }
  for (const dir of missing) {
    await fsp.mkdir(dir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST') return;
      // Its parent exists, so ENOENT here means the file system takes no new directories there (/proc, /sys).
      const reason = error.code === 'ENOENT' ? 'the file system does not allow creating directories there' : fsReason(error);
      const where = dir === target ? '' : ` (creating ${dir})`;
      throw new RestoreTargetError(`cannot create the restore target ${target}${where}: ${reason}`);
    });
  }
  return missing[0];
}
