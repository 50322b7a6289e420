/**
 * The compression of an archive (named in its sealed metadata): zstd where the runtime has it (node:zlib from
 * Node 22.15), gzip otherwise. Every runtime restores both: Node 20 decompresses zstd with fzstd (pure
 * JavaScript), the console page too (console/src/restore.worker.ts).
 */
import os from 'node:os';
import stream, { type Duplex, Transform, type TransformCallback } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { Decompress } from 'fzstd';
import { checkGzipTrailer, GZIP_TRAILING, GzipFramer, OutputLimit, ZstdFramer } from './compression-core.js';
import { IntegrityError } from './envelope-core.js';
import type { Compression } from './envelope-format.js';

/** node:zlib's zstd, when this runtime has it (the typings of Node 20 do not know it). */
interface ZstdZlib {
  createZstdCompress?: (options?: { chunkSize?: number; params?: Record<number, number> }) => Transform;
  createZstdDecompress?: (options?: { chunkSize?: number }) => Transform;
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
 * past its end of life), and there level 6 makes compression most of a backup's CPU for an archive only slightly
 * smaller (the incompressible part of a tree gains nothing): a backup's time counts more than a few percent of bytes.
 */
export const GZIP_LEVEL = 1;

/**
 * How much the compressor emits per turn of the thread pool: each turn is a thread-pool trip and a main-thread
 * callback, which at zlib's default of 16 KiB cost more than the compression itself; the bytes are the same.
 */
const COMPRESS_CHUNK = 512 * 1024; // the size of the tar writer's chunks (archive.ts, PACK_CHUNK)

/** How many threads compress at once: every core, up to the thread pool's default size. */
const COMPRESS_LANES = Math.max(1, Math.min(4, os.availableParallelism()));

/** Told of each input chunk once the compressor has consumed it (its bytes are never read again): archive.ts's ChunkPool. */
export type ReleaseInput = (chunk: Buffer) => void;

/**
 * The compressor of an archive. With `release`, every input chunk is handed to it once consumed (the tar writer
 * fills it again), so the input of a backup is a few recycled chunks instead of new ones.
 */
export function compressor(compression: Compression, gzipLevel: number = GZIP_LEVEL, release?: ReleaseInput): Transform {
  if (compression === 'gzip') return new ParallelGzip(gzipLevel, COMPRESS_LANES, release);
  if (!zstdAvailable()) throw new Error('this Node.js has no zstd compressor (Node 22.15 or later has one): use gzip');
  return new OneZstdFrame(
    zstdZlib.createZstdCompress!({ chunkSize: COMPRESS_CHUNK, params: { [zstdZlib.constants.ZSTD_c_compressionLevel!]: ZSTD_LEVEL } }),
    release,
  );
}

/**
 * node:zlib's zstd compressor, fed one chunk at a time. Left to itself, a chunk still queued when its input ends is
 * compressed with ZSTD_e_end and the stream's own end then calls ZSTD_e_end once more, which starts a second, empty
 * frame (Node 24.21): an archive the one-frame rule of docs/crypto.md §4 refuses. Waiting for each chunk keeps the
 * queue empty, so the frame is ended exactly once.
 */
class OneZstdFrame extends Transform {
  constructor(
    private readonly inner: Transform,
    private readonly release?: ReleaseInput,
  ) {
    super();
    inner.on('data', (chunk: Buffer) => this.push(chunk));
    inner.on('error', (error) => this.destroy(error));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    // node:zlib calls back once the whole chunk went into the compressor (zstd keeps what it still needs itself).
    this.inner.write(chunk, (error) => {
      if (!error) this.release?.(chunk);
      callback(error);
    });
  }

  override _flush(callback: TransformCallback): void {
    this.inner.once('end', () => callback());
    this.inner.end();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.inner.destroy();
    callback(error);
  }
}

/**
 * The input of one deflate call of ParallelGzip: each block starts with an empty dictionary. It stays 1 MiB, so a gzip
 * archive holds the same bytes as before; the tar writer's 512 KiB chunks are gathered into blocks (and given back
 * as soon as they are copied).
 */
export const GZIP_BLOCK = 1024 * 1024;
const deflateRaw = promisify(zlib.deflateRaw);
/** The samples of a block that tell whether deflating it is worth its time, and the ratio that says it is not. */
const SAMPLE_BYTES = 16 * 1024;
const INCOMPRESSIBLE = 0.97;

/**
 * One gzip member (RFC 1952) compressed on several threads, as pigz does: the input is cut into GZIP_BLOCK pieces,
 * each deflated on its own in the thread pool, ending in a sync flush (an empty stored block) so the next one's
 * blocks follow on, the last one with the final block; the header is node:zlib's own, the trailer the CRC-32 and
 * size of the whole input. Any gzip reader reads it as one member. Where gzip is the compressor (Node 20), one
 * deflate stream would hold a backup to one core (P6 in BENCHMARKS.md).
 */
class ParallelGzip extends Transform {
  /** The block being gathered (when the input does not come in whole blocks), and how much of it is filled. */
  private block: Buffer | undefined;
  private blockBytes = 0;
  /** Gathering blocks whose deflate has finished, for the next ones. */
  private readonly spare: Buffer[] = [];
  private crc = 0;
  private size = 0;
  private readonly inFlight: Promise<Buffer>[] = [];

  constructor(
    private readonly level: number,
    private readonly lanes: number,
    private readonly release?: ReleaseInput,
  ) {
    super();
    this.push(zlib.gzipSync(Buffer.alloc(0), { level }).subarray(0, 10));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.crc = zlib.crc32(chunk, this.crc);
    this.size += chunk.length;
    this.gather(chunk).then(() => callback(), callback);
  }

  override _flush(callback: TransformCallback): void {
    const last = this.block ? this.block.subarray(0, this.blockBytes) : Buffer.alloc(0);
    this.block = undefined;
    this.blockBytes = 0;
    this.inFlight.push(this.deflateBlock(last, true));
    this.drain(0)
      .then(() => {
        const trailer = Buffer.alloc(8);
        trailer.writeUInt32LE(this.crc >>> 0, 0);
        trailer.writeUInt32LE(this.size % 2 ** 32, 4);
        callback(null, trailer);
      })
      .catch(callback);
  }

  /**
   * A chunk that is a whole block (GZIP_BLOCK bytes) is deflated as it is, no copy, and given back
   * once deflated; anything else is gathered into blocks of its own (recycled once deflated), and given back at once.
   */
  private async gather(chunk: Buffer): Promise<void> {
    if (this.blockBytes === 0 && chunk.length === GZIP_BLOCK) {
      this.inFlight.push(
        this.deflateBlock(chunk).then((out) => {
          this.release?.(chunk);
          return out;
        }),
      );
      await this.drain(this.lanes - 1);
      return;
    }
    for (let at = 0; at < chunk.length;) {
      this.block ??= this.spare.pop() ?? Buffer.allocUnsafeSlow(GZIP_BLOCK);
      const n = chunk.copy(this.block, this.blockBytes, at);
      at += n;
      this.blockBytes += n;
      if (this.blockBytes < GZIP_BLOCK) continue;
      const full = this.block;
      this.block = undefined;
      this.blockBytes = 0;
      this.inFlight.push(
        this.deflateBlock(full).then((out) => {
          this.spare.push(full);
          return out;
        }),
      );
      await this.drain(this.lanes - 1);
    }
    this.release?.(chunk);
  }

  /**
   * Deflates one block, stored as it is (level 0) when three samples of it do not compress: media and encrypted files
   * cost deflate a full search for nothing, and they can be most of a tree.
   */
  private async deflateBlock(block: Buffer, last = false): Promise<Buffer> {
    const options = { finishFlush: last ? zlib.constants.Z_FINISH : zlib.constants.Z_SYNC_FLUSH };
    if (block.length < 4 * SAMPLE_BYTES || this.level === 0) return deflateRaw(block, { ...options, level: this.level });
    const middle = Math.floor(block.length / 2);
    const samples = Buffer.concat([
      block.subarray(0, SAMPLE_BYTES),
      block.subarray(middle, middle + SAMPLE_BYTES),
      block.subarray(block.length - SAMPLE_BYTES),
    ]);
    const probe = await deflateRaw(samples, { level: this.level });
    const stored = probe.length >= samples.length * INCOMPRESSIBLE;
    return deflateRaw(block, { ...options, level: stored ? 0 : this.level });
  }

  /** Passes on the oldest results, in order, until at most `keep` are still being deflated. */
  private async drain(keep: number): Promise<void> {
    while (this.inFlight.length > keep) this.push(await this.inFlight.shift()!);
  }
}

/**
 * The most the compressor can emit for `n` input bytes: for gzip zlib's deflateBound with a sync flush (5 bytes) per
 * GZIP_BLOCK, and the header and trailer; for zstd ZSTD_COMPRESSBOUND and the frame.
 */
export function compressBound(compression: Compression, n: number): number {
  if (compression === 'gzip') {
    const blocks = Math.max(1, Math.ceil(n / GZIP_BLOCK));
    return n + Math.floor(n / 4096) + Math.floor(n / 16384) + Math.floor(n / 33554432) + (13 + 5) * blocks + 18;
  }
  const small = n < 128 * 1024 ? Math.floor((128 * 1024 - n) / 2048) : 0;
  // Streaming emits a block per flush at most every 128 KiB: 3 header bytes each, plus the frame header and checksum.
  return n + Math.floor(n / 256) + small + 3 * Math.ceil(n / (128 * 1024)) + 32;
}

/** Counts the decoded bytes against the sealed plaintext size (and, for gzip, their CRC-32). */
class Checked extends Transform {
  private readonly limit: OutputLimit;
  crc = 0;

  constructor(
    sealedSize: number,
    private readonly crcToo = false,
    private readonly atEnd?: (check: Checked) => Promise<void>,
  ) {
    super();
    this.limit = new OutputLimit(sealedSize);
  }

  get bytes(): number {
    return this.limit.bytes;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.limit.add(chunk.length);
      if (this.crcToo) this.crc = zlib.crc32(chunk, this.crc);
      callback(null, chunk);
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    if (!this.atEnd) return callback();
    this.atEnd(this).then(() => callback(), callback);
  }
}

/** Passes one zstd frame on as it is, refusing anything else (the native decoder silently ignores what follows it). */
class ZstdFrameCheck extends Transform {
  private readonly framer: ZstdFramer;
  constructor(sealedSize: number) {
    super();
    this.framer = new ZstdFramer(sealedSize);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      for (const piece of this.framer.push(chunk)) this.push(piece);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.framer.end();
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }
}

/**
 * Decompresses one zstd frame with fzstd (pure JavaScript), for runtimes whose node:zlib has no zstd. The frame is fed
 * one block at a time (ZstdFramer's pieces, each at most 128 KiB of output), and no further piece while the reader
 * has not taken what is queued: a tiny hostile frame cannot flood memory. Output past the sealed size is refused.
 */
class FzstdDecompress extends Transform {
  private readonly framer: ZstdFramer;
  private readonly limit: OutputLimit;
  private wake: (() => void) | undefined;
  private readonly decoder = new Decompress((chunk) => {
    this.limit.add(chunk.length);
    this.framer.output(chunk);
    this.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  });

  constructor(sealedSize: number) {
    super();
    this.framer = new ZstdFramer(sealedSize);
    this.limit = new OutputLimit(sealedSize);
  }

  override _read(size: number): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
    super._read(size);
  }

  private async feed(pieces: Uint8Array[]): Promise<void> {
    for (const piece of pieces) {
      this.decoder.push(piece);
      while (this.readableLength >= this.readableHighWaterMark && !this.destroyed) {
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    }
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    let pieces: Uint8Array[];
    try {
      pieces = this.framer.push(chunk);
    } catch (error) {
      return callback(error as Error);
    }
    this.feed(pieces).then(() => callback(), callback);
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.framer.end();
      this.decoder.push(new Uint8Array(0), true);
      this.framer.verify(); // fzstd skips the frame's checksum; node:zlib checks it
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.wake?.();
    callback(error);
  }
}

/**
 * The size of the pieces node:zlib decompresses into (its default is 16 KiB). Each piece is a round trip to the thread
 * pool and a trip down the restore's streams (the count and hash, the tar parser, a batch for each extraction worker),
 * so 64 KiB takes a quarter of those for the same bytes; the memory is the same order (one piece held at a time).
 */
const DECOMPRESSED_CHUNK = 64 * 1024;

/**
 * The stages that decompress an archive under the rules of compression-core.ts: exactly one zstd frame or gzip
 * member, nothing after it, at most `sealedSize` bytes out; a breach is an IntegrityError. gzip is inflated raw
 * behind a GzipFramer (node:zlib's gunzip would take further members, and skip trailing zeros). `native: false`
 * forces fzstd (tests, figures).
 */
export function decompressStages(compression: Compression, sealedSize: number, options: { native?: boolean } = {}): Transform[] {
  if (compression === 'gzip') {
    const framer = new GzipFramer();
    let trailer: Uint8Array | undefined;
    let framed: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (framed = resolve));
    const frame = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        try {
          for (const piece of framer.push(chunk)) this.push(piece);
          callback();
        } catch (error) {
          callback(error as Error);
        }
      },
      flush(callback) {
        try {
          trailer = framer.end();
          framed();
          callback();
        } catch (error) {
          callback(error as Error);
        }
      },
    });
    const inflate = zlib.createInflateRaw({ chunkSize: DECOMPRESSED_CHUNK });
    const check = new Checked(sealedSize, true, async (checked) => {
      await done; // the deflate stream may end before the framer has seen the end of its input
      if (inflate.bytesWritten !== framer.bodyBytes) throw new IntegrityError(GZIP_TRAILING);
      checkGzipTrailer(trailer!, checked.crc, checked.bytes);
    });
    return [frame, inflate, check];
  }
  if ((options.native ?? true) && typeof zstdZlib.createZstdDecompress === 'function') {
    return [new ZstdFrameCheck(sealedSize), zstdZlib.createZstdDecompress({ chunkSize: DECOMPRESSED_CHUNK }), new Checked(sealedSize)];
  }
  return [new FzstdDecompress(sealedSize)];
}

/** decompressStages as one stream. */
export function decompressor(compression: Compression, sealedSize: number, options: { native?: boolean } = {}): Duplex {
  const stages = decompressStages(compression, sealedSize, options);
  // stream.compose (Node 16.9) is missing from the typings here.
  const compose = (stream as unknown as { compose: (...streams: Transform[]) => Duplex }).compose;
  return stages.length === 1 ? stages[0]! : compose(...stages);
}
