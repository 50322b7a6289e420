/**
 * The size limit of a backup's ciphertext: whose limit it is (the server's, its default, or this client's own), the
 * error that names it, and the dry run (tar → compress → count) that measures a tree against it before any upload.
 */
import { pipeline as pipelineAsync } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { ChunkPool, packTree } from './archive.js';
import { type TreeScan } from './scan.js';
import { compressBound, compressor } from './compression.js';
import { type Compression } from './envelope-format.js';
import { ciphertextSize } from './envelope.js';

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

/** zlib's deflateBound plus the gzip wrapper: the most gzip can emit for `n` input bytes. */
export const gzipBound = (n: number): number => compressBound('gzip', n);

export const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** When an archive was found too large: before any slot, with a slot but before any byte, or while uploading. */
export type TooLargeStage = 'before-slot' | 'before-upload' | 'during-upload';

export function tooLarge(limit: ArchiveLimit, ciphertextBytes: number | undefined, stage: TooLargeStage): ArchiveTooLargeError {
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
