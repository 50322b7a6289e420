/**
 * The compression of an archive (named in its sealed metadata): zstd where the runtime has it (node:zlib from
 * Node 22.15), gzip otherwise. Every runtime restores both: Node 20 decompresses zstd with fzstd (pure
 * JavaScript), the console page too (console/src/restore.worker.ts).
 */
import { Transform, type TransformCallback } from 'node:stream';
import zlib from 'node:zlib';
import { Decompress } from 'fzstd';
import type { Compression } from './envelope-format.js';

/** node:zlib's zstd, when this runtime has it (the typings of Node 20 do not know it). */
interface ZstdZlib {
  createZstdCompress?: (options?: { chunkSize?: number; params?: Record<number, number> }) => Transform;
  createZstdDecompress?: () => Transform;
  constants: { ZSTD_c_compressionLevel?: number };
}
const zstdZlib = zlib as unknown as ZstdZlib;

/** zstd's default level: about gzip -6's ratio, several times its speed (see docs/client.md for figures). */
export const ZSTD_LEVEL = 3;

export const zstdAvailable = (): boolean =>
  typeof zstdZlib.createZstdCompress === 'function' && zstdZlib.constants.ZSTD_c_compressionLevel !== undefined;

/** What a backup uses unless told otherwise. */
export const defaultCompression = (): Compression => (zstdAvailable() ? 'zstd' : 'gzip');

/**
 * gzip's level when none is given: 1, not zlib's 6. gzip is the default only where node:zlib has no zstd (Node 20,
 * past its end of life), and there level 6 was most of a backup: 2.1 s of CPU for the 45 MiB P6 tree against
 * 0.65 s at level 1, for an archive 6% larger (28% on its text, nothing on the incompressible rest; bench P6).
 */
export const GZIP_LEVEL = 1;

/**
 * How much the compressor emits per turn of the thread pool: zlib's default of 16 KiB made zstd take 1,800 trips
 * (and main-thread callbacks) for the P6 tree and 0.65 s; 1 MiB takes 0.17 s, the same bytes (bench P6).
 */
const COMPRESS_CHUNK = 1024 * 1024;

export function compressor(compression: Compression, gzipLevel: number = GZIP_LEVEL): Transform {
  if (compression === 'gzip') return zlib.createGzip({ level: gzipLevel, chunkSize: COMPRESS_CHUNK });
  if (!zstdAvailable()) throw new Error('this Node.js has no zstd compressor (Node 22.15 or later has one): use gzip');
  return zstdZlib.createZstdCompress!({ chunkSize: COMPRESS_CHUNK, params: { [zstdZlib.constants.ZSTD_c_compressionLevel!]: ZSTD_LEVEL } });
}

/** The most the compressor can emit for `n` input bytes (zlib's deflateBound + gzip wrapper; ZSTD_COMPRESSBOUND + frame). */
export function compressBound(compression: Compression, n: number): number {
  if (compression === 'gzip') return n + Math.floor(n / 4096) + Math.floor(n / 16384) + Math.floor(n / 33554432) + 13 + 18;
  const small = n < 128 * 1024 ? Math.floor((128 * 1024 - n) / 2048) : 0;
  // Streaming emits a block per flush at most every 128 KiB: 3 header bytes each, plus the frame header and checksum.
  return n + Math.floor(n / 256) + small + 3 * Math.ceil(n / (128 * 1024)) + 32;
}

/** Decompresses zstd with fzstd (pure JavaScript): for runtimes whose node:zlib has no zstd. */
class FzstdDecompress extends Transform {
  private readonly decoder = new Decompress((chunk) => {
    this.push(Buffer.from(chunk));
  });

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.decoder.push(chunk);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.decoder.push(new Uint8Array(0), true);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }
}

/** The decompressor for an archive; `native: false` forces fzstd (tests, figures). */
export function decompressor(compression: Compression, options: { native?: boolean } = {}): Transform {
  if (compression === 'gzip') return zlib.createGunzip();
  if ((options.native ?? true) && typeof zstdZlib.createZstdDecompress === 'function') return zstdZlib.createZstdDecompress();
  return new FzstdDecompress();
}
