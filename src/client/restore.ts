/**
 * `coffer restore`, as a library: download (resumed with Range/If-Range when the connection breaks) →
 * secretstream decrypt (every chunk authenticated, TAG_FINAL required) → gunzip → SHA-256 → checked tar
 * extraction into a private staging directory inside the target. Only when the final tag, the plaintext size
 * and the plaintext SHA-256 all match the sealed metadata is the staged tree moved into place; on any failure
 * the staging directory (and a target directory this restore created) is removed: nothing is written.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import zlib from 'node:zlib';
import { Meter, extractInto, placeTree } from './archive.js';
import { DecryptStream, IntegrityError, openMetadata, unwrapDek, wipe, type BackupMetadata } from './envelope.js';
import { fsReason } from './fs-errors.js';
import { CofferNetworkError, type BackupDetailBody, type CofferClient } from './sdk.js';

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
      response = await client.openContent(backupId, { from: received, etag, signal });
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

export interface RestoreOptions {
  client: CofferClient;
  masterKey: Buffer;
  backupId: string;
  target: string;
  /** Restore into a non-empty directory (merging, replacing what the backup holds). */
  force?: boolean;
  signal?: AbortSignal;
  retries?: number;
  onEvent?: (event: RestoreEvent) => void;
}

export interface RestoreResult {
  detail: BackupDetailBody;
  metadata: BackupMetadata;
  entries: number;
  target: string;
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
  await checkTarget(target, !!options.force);

  const detail = await client.getBackup(backupId, signal);
  if (detail.status !== 'READY') {
    throw new BackupNotRestorableError(`backup ${backupId} is ${detail.status}; only READY backups can be restored`);
  }
  // Keys, metadata and content are opened for the id asked for (client.getBackup refused an answer for another).
  const dek = unwrapDek(masterKey, backupId, detail);
  try {
    const metadata = openMetadata(dek, backupId, detail);
    emit({ type: 'verified-keys', metadata });

    const created = await createTarget(target);
    const staging = await fsp.mkdtemp(path.join(target, '.coffer-restore-'));
    let done = false;
    try {
      const plain = new Meter({ hash: true });
      const sink = extractInto(staging);
      const chunks = downloadCiphertext(client, backupId, {
        signal,
        retries: options.retries,
        onBytes: (received, total) => emit({ type: 'progress', received, total }),
        onResume: (from) => emit({ type: 'resumed', from }),
      });
      await pipeline(Readable.from(chunks), new DecryptStream(dek), zlib.createGunzip(), plain, sink, { signal }).catch(
        (error: Error & { code?: string }) => {
          if (typeof error.code === 'string' && error.code.startsWith('Z_')) {
            throw new IntegrityError(`the decrypted archive is not valid gzip: ${error.message}`);
          }
          throw error;
        },
      );
      const sha256 = plain.digest();
      if (plain.bytes !== metadata.plaintextSizeBytes || sha256 !== metadata.plaintextSha256) {
        throw new IntegrityError(
          `the restored archive does not match its metadata (SHA-256 ${sha256}, ${plain.bytes} bytes; ` +
            `expected ${metadata.plaintextSha256}, ${metadata.plaintextSizeBytes} bytes)`,
        );
      }
      await placeTree(staging, target, !!options.force, sink.directories);
      done = true;
      return { detail, metadata, entries: sink.entries, target };
    } finally {
      if (!done) {
        await fsp.rm(staging, { recursive: true, force: true }).catch(() => undefined);
        if (created) await fsp.rm(created, { recursive: true, force: true }).catch(() => undefined);
      }
    }
  } finally {
    wipe(dek);
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
