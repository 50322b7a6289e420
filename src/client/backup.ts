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
 */
import { pipeline } from 'node:stream';
import { pipeline as pipelineAsync } from 'node:stream/promises';
import { Writable } from 'node:stream';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { ChunkPool, Meter, packTree, type PackCounts } from './archive.js';
import { scanTree, type TreeScan } from './scan.js';
import { compressBound, compressor, defaultCompression, GZIP_LEVEL } from './compression.js';
import { isPlainName, type Compression, type SkippedEntry } from './envelope-format.js';
import {
  CHUNK_BYTES,
  CRYPTO_VERSION,
  EncryptStream,
  ciphertextSize,
  newKey,
  sealDek,
  sealMetadata,
  wipe,
  wrapDek,
  type BackupMetadata,
  type Recipient,
} from './envelope.js';
import { CofferApiError, CofferNetworkError, UploadTooLargeError, type BackupDetailBody, type CofferClient } from './sdk.js';
import { probeUploadRefusal, putToBlobHost, uploadDirect, type ProbeTarget } from './sdk-node-upload.js';
import { HostWithoutVaultError } from './vault.js';
import { VERSION } from '../lib/version.js';

/**
 * docs/api-rules.md#upload: 52,428,800 bytes of ciphertext, the server's default limit; the client assumes it only
 * for a server that announces no limit of its own (no `Coffer-Max-Archive-Bytes` on create).
 */
export const DEFAULT_MAX_ARCHIVE_BYTES = 50 * 1024 * 1024;

/**
 * The limit an archive is held to, and whose it is: the server's (announced on create, or named in a refusal), the
 * server default assumed for a server that announces none, or this client's own COFFER_MAX_ARCHIVE_BYTES, which only
 * ever lowers the server's.
 */
export interface ArchiveLimit {
  bytes: number;
  source: 'server' | 'server-default' | 'client';
  /** With source `client`: the server's limit, when known. */
  serverBytes?: number;
}

/** The lower of the server's announced limit and the client's own (undefined: none announced, none set). */
export function archiveLimit(server: number | undefined, client: number | undefined): ArchiveLimit {
  if (server === undefined)
    return client === undefined ? { bytes: DEFAULT_MAX_ARCHIVE_BYTES, source: 'server-default' } : { bytes: client, source: 'client' };
  return client !== undefined && client < server
    ? { bytes: client, source: 'client', serverBytes: server }
    : { bytes: server, source: 'server' };
}
export const CLIENT_VERSION = `coffer-cli/${VERSION}`;
/** How long freeing the slot of an interrupted backup may take. */
const CLEANUP_TIMEOUT_MS = 1500;

export class ArchiveTooLargeError extends Error {
  override readonly name = 'ArchiveTooLargeError';
  constructor(
    message: string,
    readonly limitBytes: number,
    /** Whose limit it is (ArchiveLimit.source). */
    readonly limitSource: ArchiveLimit['source'],
    /** Exact or lower-bound ciphertext size, when known. */
    readonly ciphertextBytes: number | undefined,
    /** Whether bytes had already been sent (the slot was then deleted). */
    readonly duringUpload: boolean,
  ) {
    super(message);
  }
}

export type BackupEvent =
  | { type: 'scanned'; scan: TreeScan }
  | { type: 'measuring'; reason: string }
  | { type: 'measured'; ciphertextBytes: number }
  | { type: 'slot'; backupId: string; reused: boolean }
  | { type: 'replaced'; backupId: string }
  | { type: 'progress'; plaintextBytes: number; ciphertextBytes: number; estimatedPlaintextBytes: number }
  | { type: 'uploaded'; ciphertextBytes: number }
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

/** Standard input ended before its first byte: a producer that failed at once, most likely. */
export class EmptyStreamError extends Error {
  override readonly name = 'EmptyStreamError';
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
  /** The history-chain link sealed into the metadata (src/client/chain.ts nextLink). */
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

/** zlib's deflateBound plus the gzip wrapper: the most gzip can emit for `n` input bytes. */
export const gzipBound = (n: number): number => compressBound('gzip', n);

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** When an archive was found too large: before any slot, with a slot but before any byte, or while uploading. */
type TooLargeStage = 'before-slot' | 'before-upload' | 'during-upload';

function tooLarge(limit: ArchiveLimit, ciphertextBytes: number | undefined, stage: TooLargeStage): ArchiveTooLargeError {
  const size = ciphertextBytes === undefined ? 'more than that' : `at least ${mib(ciphertextBytes)} (${ciphertextBytes} bytes)`;
  const when = {
    'before-slot': 'nothing was uploaded',
    'before-upload': 'nothing was uploaded and its slot deleted',
    'during-upload': 'the upload was stopped and its slot deleted',
  }[stage];
  const whose = {
    server: 'limit of the server',
    'server-default': 'limit of the server (its default: this server announces no limit of its own)',
    client: 'limit this client sets (COFFER_MAX_ARCHIVE_BYTES on this machine)',
  }[limit.source];
  const raise =
    limit.source === 'client'
      ? `Raise or unset COFFER_MAX_ARCHIVE_BYTES here (it can only lower the server's limit${limit.serverBytes === undefined ? '' : `, ${mib(limit.serverBytes)} (${limit.serverBytes} bytes)`})`
      : "The server's operator raises it with COFFER_MAX_ARCHIVE_BYTES on the server (nothing to set on this client)";
  return new ArchiveTooLargeError(
    `the encrypted archive would exceed the ${mib(limit.bytes)} (${limit.bytes} bytes) ${whose}: it is ${size}; ${when}. ` +
      `${raise}; or back up a smaller directory, or split it into several backups.`,
    limit.bytes,
    limit.source,
    ciphertextBytes,
    stage === 'during-upload',
  );
}

/** Exact ciphertext size by a dry run (tar → compress → count), stopped as soon as it passes `limit`. */
export async function measureCiphertext(
  scan: TreeScan,
  limit: ArchiveLimit,
  gzipLevel: number,
  signal?: AbortSignal,
  compression: Compression = 'gzip',
  stage: TooLargeStage = 'before-slot',
): Promise<number> {
  let compressed = 0;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      compressed += chunk.length;
      const size = ciphertextSize(compressed);
      callback(size > limit.bytes ? tooLarge(limit, size, stage) : null);
    },
  });
  const pool = new ChunkPool();
  await pipelineAsync(
    packTree(scan, undefined, pool),
    compressor(compression, gzipLevel, (chunk) => pool.release(chunk)),
    sink,
    { signal },
  );
  return ciphertextSize(compressed);
}

interface Slot {
  backupId: string;
  upload: { protocol: 'direct'; url: string } | { protocol: 'blobhost-client'; handleUploadUrl: string; blobPath: string };
  /** The server's archive limit, when its create answer announced one (a reused slot has none). */
  maxArchiveBytes: number | undefined;
}

/**
 * A slot to upload into. On 409 `upload_in_progress` the slot named in details.backupId is reused when it is
 * still PENDING_UPLOAD (nothing was stored in it), or deleted and replaced when it is UPLOADED (its data key
 * died with the client that uploaded it, so it can never be finalized).
 */
async function acquireSlot(
  client: CofferClient,
  signal: AbortSignal | undefined,
  emit: (e: BackupEvent) => void,
  sealed: boolean,
): Promise<Slot> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const { slot: created, maxArchiveBytes } = await client.openSlot(signal).catch((error: unknown) => {
        // A host sealing to a recipient never initializes a vault: no vault means the key's account is the wrong one.
        if (sealed && error instanceof CofferApiError && error.code === 'vault_not_initialized') throw new HostWithoutVaultError();
        throw error;
      });
      emit({ type: 'slot', backupId: created.backupId, reused: false });
      const { upload } = created;
      return {
        maxArchiveBytes,
        backupId: created.backupId,
        upload:
          upload.protocol === 'direct'
            ? { protocol: 'direct', url: client.directUploadUrl(created.backupId, upload.uploadUrl) }
            : { protocol: 'blobhost-client', handleUploadUrl: upload.handleUploadUrl, blobPath: created.blobPath },
      };
    } catch (error) {
      if (!(error instanceof CofferApiError) || error.code !== 'upload_in_progress') throw error;
      const otherId = error.details?.backupId;
      if (typeof otherId !== 'string') throw error;
      const other = await client.getBackup(otherId, signal).catch((e: unknown) => {
        if (e instanceof CofferApiError && e.status === 404) return undefined;
        throw e;
      });
      if (other?.status === 'PENDING_UPLOAD') {
        // Its blobPath is not part of BackupDetail, so a reused slot is filled with a direct upload (which a
        // Coffer server in blobhost-client mode accepts as well).
        emit({ type: 'slot', backupId: otherId, reused: true });
        return { backupId: otherId, upload: { protocol: 'direct', url: client.directUploadUrl(otherId) }, maxArchiveBytes: undefined };
      }
      if (other) {
        await client.deleteBackup(otherId, signal).catch((e: unknown) => {
          if (!(e instanceof CofferApiError && e.status === 404)) throw e;
        });
        emit({ type: 'replaced', backupId: otherId });
      }
    }
  }
  throw new Error('could not obtain an upload slot: another upload keeps taking it');
}

/** The settings the three phases of a backup share. */
interface BackupRun {
  options: BackupOptions;
  sources: string[];
  compression: Compression;
  gzipLevel: number;
  emit: (event: BackupEvent) => void;
}

/**
 * What a backup reads: a scanned tree (packed as tar) or a stream (as one raw file). What waits for the slot
 * (options.afterSlot, a producer to start, a scan after it) runs in opened(), with the size check the slot's limit
 * asks for.
 */
class BackupInput {
  scan: TreeScan | undefined;
  /** The exact ciphertext size, once a dry run measured it (a tree whose bound passes a limit). */
  private measured: number | undefined;
  readonly counts: PackCounts = { files: 0, directories: 0, symlinks: 0 };
  /** The tar stream's chunks, given back by the compressor once consumed (a stream's own chunks are not the pool's). */
  readonly pool = new ChunkPool();
  private readonly afterSlot: (() => Promise<void>)[];
  private start: () => AsyncIterable<Buffer> = () => {
    throw new Error('the stream was not started');
  };

  constructor(private readonly run: BackupRun) {
    this.afterSlot = run.options.afterSlot ? [run.options.afterSlot] : [];
  }

  /** The plaintext, from its start (a tree's tar stream, or the stream's bytes). */
  read(): AsyncIterable<Buffer> {
    return this.start();
  }

  private async measure(tree: TreeScan, against: ArchiveLimit, stage: TooLargeStage): Promise<number> {
    const { emit, gzipLevel, compression, options } = this.run;
    emit({ type: 'measuring', reason: `the tree holds ${mib(tree.fileBytes)}; measuring its compressed size` });
    const exact = await measureCiphertext(tree, against, gzipLevel, options.signal, compression, stage);
    emit({ type: 'measured', ciphertextBytes: exact });
    return exact;
  }

  private fitsSurely(tree: TreeScan, bytes: number): boolean {
    return ciphertextSize(compressBound(this.run.compression, tree.tarBoundBytes)) <= bytes;
  }

  /** Prepares the stream (read at once when already flowing, or started once the slot is open). */
  async prepareStream(stream: StreamSource): Promise<void> {
    if (!isPlainName(stream.name)) {
      throw new Error(
        `the name of a stream backup must be a plain file name (no "/", no control characters): ${JSON.stringify(stream.name)}`,
      );
    }
    // A stream that ends at once is a producer that failed: its first bytes are read before the upload starts.
    const startStream = async () => {
      const source = typeof stream.stream === 'function' ? stream.stream() : stream.stream;
      const iterator = source[Symbol.asyncIterator]();
      const first = await iterator.next();
      if (first.done) throw new EmptyStreamError('the input stream ended before its first byte: nothing was uploaded');
      this.counts.files = 1;
      this.start = async function* () {
        yield first.value;
        for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
      };
    };
    // A stream already flowing is read before any slot is opened; a producer yet to start waits for the slot.
    if (typeof stream.stream === 'function') this.afterSlot.push(startStream);
    else await startStream();
  }

  /** Prepares the scan of the sources (now, or after options.afterSlot once the slot is open). */
  async prepareTree(): Promise<void> {
    const { options, sources, emit } = this.run;
    const clientLimit = options.maxArchiveBytes;
    const scanSources = async () => {
      const tree = await scanTree(sources, { exclude: options.exclude, skipUnreadable: options.skipUnreadable, signal: options.signal });
      this.scan = tree;
      emit({ type: 'scanned', scan: tree });
      // This client's own limit is known before any slot: a tree over it opens none (unless the scan waits for one).
      if (clientLimit !== undefined && !this.fitsSurely(tree, clientLimit)) {
        this.measured = await this.measure(tree, archiveLimit(undefined, clientLimit), options.afterSlot ? 'before-upload' : 'before-slot');
      }
      this.start = () => packTree(tree, this.counts, this.pool);
    };
    if (options.afterSlot) this.afterSlot.push(scanSources);
    else await scanSources();
  }

  /**
   * The server said yes (the slot is open): only now do the hooks and a command producing the stream run, and a
   * tree that might not fit the slot's limit is measured.
   */
  async opened(limit: ArchiveLimit): Promise<void> {
    for (const step of this.afterSlot) await step();
    if (this.scan && !this.fitsSurely(this.scan, limit.bytes)) {
      if (this.measured === undefined) this.measured = await this.measure(this.scan, limit, 'before-upload');
      else if (this.measured > limit.bytes) throw tooLarge(limit, this.measured, 'before-upload');
    }
  }
}

/** How much plaintext a backup reads between two collections of V8's young generation (youngCollector). */
const COLLECT_EVERY = 4 * 1024 * 1024;

/**
 * A minor garbage collection (a scavenge of V8's young generation), run by the upload every COLLECT_EVERY bytes of
 * plaintext. The compressor's and the encryptor's 1 MiB output buffers die young, but V8 scavenged only when its young
 * generation filled, 20–35 MiB of them later, and the memory they held stayed resident (bench P9: peak RSS of the P6
 * backup 136 → 115 MiB on Node 20, 154 → 121 MiB on Node 24, no more CPU). A process reaches V8's gc() only through
 * a context made while --expose-gc is on: the flag is on for that one context, so the program's own global scope
 * never has a gc. Undefined where the runtime does not allow it.
 */
function youngCollector(): (() => void) | undefined {
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('typeof gc === "function" ? gc : undefined') as ((options: { type: 'minor' }) => void) | undefined;
    if (!gc) return undefined;
    let usable = true;
    // A runtime whose gc() refuses the options is left to collect on its own.
    return () => {
      if (!usable) return;
      try {
        gc({ type: 'minor' });
      } catch {
        usable = false;
      }
    };
  } catch {
    return undefined;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

/** What the upload counted: the plaintext read and the ciphertext sent (each with its SHA-256 when hashed). */
interface Uploaded {
  plain: Meter;
  cipher: Meter;
}

/**
 * Streams input → compressor → secretstream into the slot by its protocol (a direct upload to the server, or the
 * blob host with a client token), held to `limit`. A refusal over the limit, or a broken connection that a probe
 * shows was one, is an ArchiveTooLargeError.
 */
async function upload(run: BackupRun, slot: Slot, limit: ArchiveLimit, input: BackupInput, dek: Buffer): Promise<Uploaded> {
  const { options, emit, compression, gzipLevel } = run;
  const { client, signal } = options;
  let ciphertextBytes = 0;
  const progress = () =>
    emit({
      type: 'progress',
      plaintextBytes: plain.bytes,
      ciphertextBytes,
      estimatedPlaintextBytes: Math.max(input.scan?.tarBoundBytes ?? 0, plain.bytes),
    });
  const collect = youngCollector();
  let collectAt = COLLECT_EVERY;
  const plain = new Meter({
    hash: true,
    onBytes: (total) => {
      if (collect && total >= collectAt) {
        collectAt = total + COLLECT_EVERY;
        collect();
      }
      progress();
    },
  });
  const cipher = new Meter({
    // Only a chain link names the ciphertext's SHA-256: without one, no hash on the backup path.
    hash: options.chain !== undefined,
    limit: limit.bytes,
    onBytes: (total) => {
      ciphertextBytes = total;
    },
    onLimit: (seen) => tooLarge(limit, seen, 'during-upload'),
  });
  let pipeError: Error | null = null;
  const release = (chunk: Buffer) => input.pool.release(chunk);
  pipeline(input.read(), plain, compressor(compression, gzipLevel, release), new EncryptStream(dek), cipher, (error) => {
    pipeError = error ?? null;
  });
  let probeTarget: ProbeTarget | undefined;
  try {
    if (slot.upload.protocol === 'direct') {
      probeTarget = slot.upload;
      const uploaded = await uploadDirect(client, slot.upload.url, cipher, { signal });
      if (uploaded.size !== cipher.bytes) {
        throw new Error(`the server stored ${uploaded.size} bytes but ${cipher.bytes} were sent`);
      }
    } else {
      const { handleUploadUrl, blobPath } = slot.upload;
      const clientToken = await client.negotiateBlobUpload(handleUploadUrl, blobPath, signal);
      probeTarget = { protocol: 'blobhost-client', clientToken, blobPath };
      await putToBlobHost(client, clientToken, blobPath, cipher, { signal });
    }
  } catch (error) {
    if (error instanceof UploadTooLargeError) {
      const max = error.maxBytes ?? limit.bytes;
      throw tooLarge({ bytes: max, source: 'server' }, Math.max(cipher.bytes, max + 1), 'during-upload');
    }
    if (error instanceof CofferNetworkError && probeTarget && cipher.bytes > 0 && !signal?.aborted) {
      // The connection broke with no answer: was it a cut-off (size, quota) whose 413 the TCP reset swallowed?
      const refusal = await probeUploadRefusal(client, probeTarget, cipher.bytes);
      if (refusal instanceof UploadTooLargeError && refusal.maxBytes !== undefined && cipher.bytes > refusal.maxBytes) {
        throw tooLarge({ bytes: refusal.maxBytes, source: 'server' }, cipher.bytes, 'during-upload');
      }
      if (refusal && !(refusal instanceof UploadTooLargeError)) throw refusal;
    }
    // The server's answer (or the broken connection) is what happened; the pipeline's own error only when it broke
    // first (a source that cannot be read): a refusal mid-stream also ends the pipeline, with "Premature close".
    throw error instanceof CofferApiError || error instanceof CofferNetworkError || !pipeError ? error : pipeError;
  }
  return { plain, cipher };
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
    // Someone else moved the slot on (409): it is theirs now. Anything else: free it for the next attempt.
    const movedByOthers = error instanceof CofferApiError && error.status === 409;
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
