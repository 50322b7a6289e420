/**
 * `coffer backup`, as a library: tar (of the entries the scan selected) → zstd or gzip → secretstream → HTTP
 * upload body in one streamed pipeline (no plaintext temp file, bounded memory), then finalize with the wrapped
 * DEK and sealed metadata. A stream (standard input) is backed up the same way as one raw file: no tar, no scan.
 *
 * Size limit (50 MiB of ciphertext by default): a bound computed from a scan of the tree decides whether the
 * archive surely fits. When it might not, a dry run (tar → compress → byte count, stopped as soon as the limit is
 * crossed) measures the exact ciphertext size before any slot is opened. During the real upload a byte
 * counter still stops the stream the moment the limit is crossed (files may grow meanwhile, or the server may
 * have a lower limit: its 413 is honoured), and the slot is deleted.
 *
 * The limit is ./archive-limit.ts, the input (tree or stream) ./backup-input.ts, the slot and the upload
 * ./backup-upload.ts; this file holds the options, the finalize and runBackup, which runs the phases in order.
 */
import path from 'node:path';
import { type TreeScan } from './scan.js';
import { defaultCompression, GZIP_LEVEL } from './compression.js';
import { type Compression, type SkippedEntry } from './envelope-format.js';
import {
  CHUNK_BYTES,
  CRYPTO_VERSION,
  newKey,
  sealDek,
  sealMetadata,
  wipe,
  wrapDek,
  type BackupMetadata,
  type Recipient,
} from './envelope.js';
import { CofferApiError, CofferNetworkError, type BackupDetailBody, type CofferClient } from './sdk.js';
import { VERSION } from '../lib/version.js';
import { archiveLimit } from './archive-limit.js';
import { BackupInput } from './backup-input.js';
import { acquireSlot, upload, type Slot, type Uploaded } from './backup-upload.js';

export const CLIENT_VERSION = `coffer-cli/${VERSION}`;
/** How long freeing the slot of an interrupted backup may take. */
const CLEANUP_TIMEOUT_MS = 1500;

export type BackupEvent =
  | { type: 'scanned'; scan: TreeScan }
  | { type: 'measuring'; reason: string }
  | { type: 'measured'; ciphertextBytes: number }
  | { type: 'slot'; backupId: string; reused: boolean }
  | { type: 'replaced'; backupId: string }
  | { type: 'progress'; plaintextBytes: number; ciphertextBytes: number; estimatedPlaintextBytes: number }
  | { type: 'uploaded'; ciphertextBytes: number }
  /** The server offered the upload straight to its store, which this client could not reach: the server's way instead. */
  | { type: 'store-unreachable'; reason: string }
  | { type: 'slot-deleted'; backupId: string };

/** A stream backed up as one file (`coffer backup --stdin`, `--stdin-from-command`). */
export interface StreamSource {
  /**
   * The stream, or a function that starts it. A function (a command to run, `--stdin-from-command`) is called only
   * once the server has opened the backup's slot: a backup the server refuses (cadence, quota, auth, no vault) never
   * starts its producer. A stream already flowing (standard input) has its first bytes read before the slot.
   */
  stream: AsyncIterable<Buffer> | (() => AsyncIterable<Buffer>);
  /** The file's name in the backup (one path segment). */
  name: string;
  /**
   * Called once the stream has ended and been uploaded, before the backup is finalized: a rejection (say, the
   * producing command exited non-zero) fails the backup and frees its slot.
   */
  ended?: () => Promise<void>;
}

export interface BackupOptions {
  client: CofferClient;
  /** The DEK is wrapped with the master key, or sealed to a recipient (docs/crypto.md §2b): exactly one of them. */
  masterKey?: Buffer;
  recipient?: Recipient;
  /** What to back up: one path, several paths, or a stream. */
  source?: string;
  sources?: readonly string[];
  stream?: StreamSource;
  /** gitignore-style patterns (relative to each backed-up directory); `.cofferignore` files are honoured too. */
  exclude?: readonly string[];
  /** Leave out (and list) what cannot be read instead of failing. */
  skipUnreadable?: boolean;
  /** The user name archived as the owner of this user's files (the CLI passes the OS user's, USER); default none. */
  ownerName?: string;
  /** Default: zstd where node:zlib has it, gzip otherwise. */
  compression?: Compression;
  /** Name kept in the sealed metadata (default: the source's base name). */
  name?: string;
  /** This client's own limit (COFFER_MAX_ARCHIVE_BYTES): it only lowers the limit the server announces. */
  maxArchiveBytes?: number;
  gzipLevel?: number;
  hostappVersion?: string;
  /** The application's part of the sealed metadata (the SDK's application API, docs/crypto.md §3). */
  application?: { hostappVersion?: string; metadata?: Record<string, unknown> };
  /** The history-chain link sealed into the metadata (src/client/chain-link.ts nextLink). */
  chain?: BackupMetadata['chain'];
  signal?: AbortSignal;
  onEvent?: (event: BackupEvent) => void;
  /**
   * Runs once the server has opened the backup's slot, before any source is read (the agent's start notification
   * and before hook): a backup the server refuses (cadence, quota, key, no vault) never runs it, and the tree is
   * scanned after it. Its failure frees the slot, as every other failure does.
   */
  afterSlot?: () => Promise<void>;
}

export interface BackupResult {
  detail: BackupDetailBody;
  metadata: BackupMetadata;
  /** What was left out (unreadable with skipUnreadable, special files): also in the sealed metadata. */
  skipped: SkippedEntry[];
  /** With `chain`: SHA-256 of the uploaded ciphertext (hex), which the next link of the chain names. */
  ciphertextSha256?: string;
}

/** The settings the three phases of a backup share. */
export interface BackupRun {
  options: BackupOptions;
  sources: string[];
  compression: Compression;
  gzipLevel: number;
  emit: (event: BackupEvent) => void;
}

/** Seals the metadata and the data key into the finalize body and finalizes the backup (looking first after a broken connection). */
async function finalize(run: BackupRun, slot: Slot, input: BackupInput, dek: Buffer, { plain, cipher }: Uploaded): Promise<BackupResult> {
  const { options, sources, compression } = run;
  const { client, recipient, masterKey, signal } = options;
  const { scan, counts } = input;
  const skipped = scan?.skipped ?? [];
  const metadata: BackupMetadata = {
    format: 'coffer-archive/v1',
    name: options.stream ? options.stream.name : (options.name ?? path.basename(path.resolve(sources[0]!))),
    sourcePath: options.stream ? '-' : path.resolve(sources[0]!),
    createdAt: new Date().toISOString(),
    kind: scan?.kind ?? 'file',
    fileCount: counts.files,
    directoryCount: counts.directories,
    symlinkCount: counts.symlinks,
    archive: options.stream ? 'raw' : 'tar',
    compression,
    chunkBytes: CHUNK_BYTES,
    plaintextSizeBytes: plain.bytes,
    plaintextSha256: plain.digest(),
    ciphertextSizeBytes: cipher.bytes,
    ...(sources.length > 1 ? { sources: sources.map((source) => path.resolve(source)) } : {}),
    ...(scan && scan.excluded > 0 ? { excludedCount: scan.excluded } : {}),
    ...(skipped.length > 0 ? { skipped } : {}),
    ...(options.chain ? { chain: options.chain } : {}),
    ...(options.application ? { application: options.application } : {}),
  };
  const body = {
    cryptoVersion: CRYPTO_VERSION,
    ...(recipient ? sealDek(recipient, slot.backupId, dek) : wrapDek(masterKey!, slot.backupId, dek)),
    ...sealMetadata(dek, slot.backupId, metadata),
    ciphertextSizeBytes: cipher.bytes,
    plaintextSizeBytes: plain.bytes,
    clientVersion: CLIENT_VERSION,
    ...(options.hostappVersion ? { hostappVersion: options.hostappVersion } : {}),
  };
  let detail: BackupDetailBody;
  try {
    detail = await client.finalizeBackup(slot.backupId, body, signal);
  } catch (error) {
    if (!(error instanceof CofferNetworkError) || signal?.aborted) throw error;
    // The connection broke: the finalize may or may not have landed. Look, then retry once.
    const current = await client.getBackup(slot.backupId, signal);
    detail = current.status === 'READY' ? current : await client.finalizeBackup(slot.backupId, body, signal);
  }
  return { detail, metadata, skipped, ...(options.chain ? { ciphertextSha256: cipher.digest() } : {}) };
}

/** A backup: its input prepared, a slot opened, the upload by the slot's protocol, then the finalize; a failure frees the slot. */
export async function runBackup(options: BackupOptions): Promise<BackupResult> {
  const { client, masterKey, recipient, signal } = options;
  if (!masterKey === !recipient) throw new Error('runBackup needs either a master key or a recipient');
  const sources = [...(options.sources ?? (options.source !== undefined ? [options.source] : []))];
  if (sources.length > 0 === !!options.stream) throw new Error('runBackup needs either paths or a stream');
  const run: BackupRun = {
    options,
    sources,
    compression: options.compression ?? defaultCompression(),
    gzipLevel: options.gzipLevel ?? GZIP_LEVEL,
    emit: options.onEvent ?? (() => undefined),
  };

  const input = new BackupInput(run);
  if (options.stream) await input.prepareStream(options.stream);
  else await input.prepareTree();

  const slot = await acquireSlot(client, signal, run.emit, !!recipient);
  // The server's limit comes with the slot; the client's own only lowers it.
  const limit = archiveLimit(slot.maxArchiveBytes, options.maxArchiveBytes);
  const dek = newKey();
  try {
    // Ending empty or failing frees the slot below, as every other failure does.
    await input.opened(limit);
    const uploaded = await upload(run, slot, limit, input, dek);
    run.emit({ type: 'uploaded', ciphertextBytes: uploaded.cipher.bytes });
    // A producer that failed after its last byte (non-zero exit) fails the backup before anything is finalized.
    await options.stream?.ended?.();
    return await finalize(run, slot, input, dek, uploaded);
  } catch (error) {
    // Someone else moved the slot on (409): it is theirs now. Anything else (also a store that holds another size than
    // was sent, 409 ciphertext_size_mismatch: the slot is still this client's): free it for the next attempt.
    const movedByOthers = error instanceof CofferApiError && error.status === 409 && error.code !== 'ciphertext_size_mismatch';
    if (!movedByOthers) {
      // After Ctrl-C the slot is still freed, but a slow server may not hold up the exit.
      const cleanup = signal?.aborted ? AbortSignal.timeout(CLEANUP_TIMEOUT_MS) : undefined;
      const deleted = await client.deleteBackup(slot.backupId, cleanup).then(
        () => true,
        () => false,
      );
      if (deleted) run.emit({ type: 'slot-deleted', backupId: slot.backupId });
    }
    throw error;
  } finally {
    wipe(dek);
  }
}
