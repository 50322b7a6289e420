/**
 * The rules every reader applies to a decrypted archive before and while decompressing it, environment-neutral (no
 * Node API), so the CLI on every Node and the console page (console/src/restore.worker.ts) give one verdict
 * (docs/crypto.md §4):
 *  - the compressed stream is exactly one zstd frame or one gzip member, with nothing after it (no second frame or
 *    member, no skippable frame, no padding);
 *  - it decompresses to at most the sealed `plaintextSizeBytes`: a reader stops as soon as the output would exceed it.
 * Anything else is an IntegrityError. The framers split the stream at the format's own boundaries, so a decoder fed
 * one piece at a time emits at most one zstd block (128 KiB) per piece: a few bytes of a hostile archive never turn
 * into gigabytes at once.
 */
import { IntegrityError } from './envelope-core.js';

/** libzstd's default limit for a frame's window (ZSTD_WINDOWLOG_LIMIT_DEFAULT = 27): larger ones it refuses. */
export const ZSTD_MAX_WINDOW = 2 ** 27;
const ZSTD_MAX_BLOCK = 128 * 1024;

/** Counts decompressed bytes against the sealed plaintext size. */
export class OutputLimit {
  bytes = 0;
  constructor(readonly limit: number) {}

  add(n: number): void {
    this.bytes += n;
    if (this.bytes > this.limit) {
      throw new IntegrityError(`the archive decompresses to more than its sealed ${this.limit} bytes`);
    }
  }
}

const concat = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
};

/**
 * Walks one zstd frame (RFC 8878 §3.1.1) without decoding it: `push` returns the input cut into pieces that each end
 * at most at one block's end (the whole frame, in order), and throws on anything that is not part of exactly one
 * frame; `end` throws when the frame is incomplete.
 */
export class ZstdFramer {
  private held: Uint8Array = new Uint8Array(0);
  private state: 'header' | 'block-header' | 'block' | 'checksum' | 'done' = 'header';
  /** Bytes still to pass in the current block body or checksum. */
  private remaining = 0;
  private lastBlock = false;
  private checksum = false;
  private readonly checksumBytes: number[] = [];
  private blockMax = ZSTD_MAX_BLOCK;
  /** XXH64 of the output, for a decoder that does not check the frame's checksum itself (fzstd). */
  private digest: Xxh64 | undefined;

  constructor(private readonly sealedSize: number) {}

  push(chunk: Uint8Array): Uint8Array[] {
    const pieces: Uint8Array[] = [];
    let data = concat(this.held, chunk);
    this.held = new Uint8Array(0);
    let start = 0;
    let at = 0;
    const cut = () => {
      if (at > start) pieces.push(data.subarray(start, at));
      start = at;
    };
    // An empty block (raw, size 0) at the end of the input is whole already: the loop passes it on too.
    while (at < data.length || (this.state === 'block' && this.remaining === 0)) {
      if (this.state === 'done') throw new IntegrityError('the zstd stream has bytes after its one frame');
      if (this.state === 'header') {
        const size = this.headerSize(data.subarray(at));
        if (size === undefined) break;
        at += size;
        this.state = 'block-header';
      } else if (this.state === 'block-header') {
        if (data.length - at < 3) break;
        const b = data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16);
        const type = (b >> 1) & 3;
        const size = b >>> 3;
        if (type === 3) throw new IntegrityError('the zstd frame has a block of the reserved type');
        if (size > this.blockMax) throw new IntegrityError('the zstd frame has a block larger than its limit');
        this.lastBlock = (b & 1) === 1;
        at += 3;
        this.remaining = type === 1 ? 1 : size;
        this.state = 'block';
      } else {
        const take = Math.min(this.remaining, data.length - at);
        if (this.state === 'checksum') this.checksumBytes.push(...data.subarray(at, at + take));
        at += take;
        this.remaining -= take;
        if (this.remaining > 0) continue;
        if (this.state === 'block') {
          cut(); // a piece ends with each block
          if (!this.lastBlock) this.state = 'block-header';
          else if (this.checksum) [this.state, this.remaining] = ['checksum', 4];
          else this.state = 'done';
        } else {
          this.state = 'done';
        }
      }
    }
    if (at < data.length) {
      // An incomplete frame or block header: keep it for the next chunk (it is at most 18 bytes).
      cut();
      this.held = data.slice(at);
      data = data.subarray(0, at);
    }
    cut();
    return pieces;
  }

  end(): void {
    if (this.state !== 'done' || this.held.length > 0) throw new IntegrityError('the zstd frame is incomplete');
  }

  /** For a decoder that does not verify the frame's checksum (fzstd): hashes its output, to be checked by `verify`. */
  output(chunk: Uint8Array): void {
    if (!this.checksum) return;
    this.digest ??= new Xxh64();
    this.digest.update(chunk);
  }

  /** Checks the frame's checksum (when it has one) against what `output` saw; after `end`. */
  verify(): void {
    if (!this.checksum) return;
    const low = (this.digest ?? new Xxh64()).digest() & 0xffffffffn;
    const sealed = BigInt(this.checksumBytes.reduceRight((acc, b) => acc * 256 + b, 0));
    if (low !== sealed) throw new IntegrityError('the zstd frame fails its checksum');
  }

  /** The size of the frame header at the start of `data`, or undefined when more bytes are needed. */
  private headerSize(data: Uint8Array): number | undefined {
    if (data.length < 5) return undefined;
    if (data[0] !== 0x28 || data[1] !== 0xb5 || data[2] !== 0x2f || data[3] !== 0xfd) {
      throw new IntegrityError('the compressed stream is not one zstd frame');
    }
    const flags = data[4]!;
    const contentSizeFlag = flags >> 6;
    const singleSegment = (flags >> 5) & 1;
    if (flags & 8) throw new IntegrityError('the zstd frame header has its reserved bit set');
    const dictBytes = [0, 1, 2, 4][flags & 3]!;
    const sizeBytes = contentSizeFlag === 0 ? singleSegment : 1 << contentSizeFlag;
    const size = 5 + (singleSegment ? 0 : 1) + dictBytes + sizeBytes;
    if (data.length < size) return undefined;
    if (dictBytes > 0 && data.subarray(6 - singleSegment, 6 - singleSegment + dictBytes).some((b) => b !== 0)) {
      throw new IntegrityError('the zstd frame needs a dictionary');
    }
    let contentSize: number | undefined;
    if (sizeBytes > 0) {
      let value = 0;
      const from = size - sizeBytes;
      for (let i = sizeBytes - 1; i >= 0; i--) value = value * 256 + data[from + i]!;
      contentSize = value + (sizeBytes === 2 ? 256 : 0);
      if (contentSize !== this.sealedSize) {
        throw new IntegrityError(`the zstd frame holds ${contentSize} bytes; the sealed metadata says ${this.sealedSize}`);
      }
    }
    let window = contentSize ?? 0;
    if (!singleSegment) {
      const descriptor = data[5]!;
      const base = 2 ** (10 + (descriptor >> 3));
      window = base + (base / 8) * (descriptor & 7);
    }
    if (window > ZSTD_MAX_WINDOW) throw new IntegrityError(`the zstd frame asks for a ${window}-byte window (at most ${ZSTD_MAX_WINDOW})`);
    this.blockMax = Math.min(ZSTD_MAX_BLOCK, Math.max(window, 1));
    this.checksum = ((flags >> 2) & 1) === 1;
    return size;
  }
}

const M64 = (1n << 64n) - 1n;
const P1 = 11400714785074694791n;
const P2 = 14029467366897019727n;
const P3 = 1609587929392839161n;
const P4 = 9650029242287828579n;
const P5 = 2870177450012600261n;
const rotl = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (64n - r))) & M64;
const round = (acc: bigint, lane: bigint): bigint => (rotl((acc + lane * P2) & M64, 31n) * P1) & M64;

/**
 * XXH64 with seed 0 (zstd's frame checksum is its low 32 bits), in BigInt: slow, but only frames that carry a checksum
 * need it, and Coffer's compressor writes none (a hand-made frame may: the zstd program's default).
 */
export class Xxh64 {
  private v = [(P1 + P2) & M64, P2, 0n, (1n << 64n) - P1];
  private buffer = new Uint8Array(32);
  private buffered = 0;
  private total = 0;

  update(data: Uint8Array): void {
    this.total += data.length;
    let at = 0;
    if (this.buffered > 0) {
      const take = Math.min(32 - this.buffered, data.length);
      this.buffer.set(data.subarray(0, take), this.buffered);
      this.buffered += take;
      at = take;
      if (this.buffered < 32) return;
      this.stripe(this.buffer, 0);
      this.buffered = 0;
    }
    for (; at + 32 <= data.length; at += 32) this.stripe(data, at);
    this.buffer.set(data.subarray(at));
    this.buffered = data.length - at;
  }

  digest(): bigint {
    const [v1, v2, v3, v4] = this.v as [bigint, bigint, bigint, bigint];
    let h: bigint;
    if (this.total >= 32) {
      h = (rotl(v1, 1n) + rotl(v2, 7n) + rotl(v3, 12n) + rotl(v4, 18n)) & M64;
      for (const v of [v1, v2, v3, v4]) h = (((h ^ round(0n, v)) * P1) & M64) + P4;
    } else {
      h = P5;
    }
    h = (h + BigInt(this.total)) & M64;
    const view = new DataView(this.buffer.buffer);
    let at = 0;
    for (; at + 8 <= this.buffered; at += 8) h = ((rotl(h ^ round(0n, view.getBigUint64(at, true)), 27n) * P1) & M64) + P4;
    if (at + 4 <= this.buffered) {
      h = ((rotl(h ^ ((BigInt(view.getUint32(at, true)) * P1) & M64), 23n) * P2) & M64) + P3;
      at += 4;
    }
    for (; at < this.buffered; at++) h = (rotl(h ^ ((BigInt(this.buffer[at]!) * P5) & M64), 11n) * P1) & M64;
    h &= M64;
    h = ((h ^ (h >> 33n)) * P2) & M64;
    h = ((h ^ (h >> 29n)) * P3) & M64;
    return h ^ (h >> 32n);
  }

  private stripe(data: Uint8Array, at: number): void {
    const view = new DataView(data.buffer, data.byteOffset + at, 32);
    for (let i = 0; i < 4; i++) this.v[i] = round(this.v[i]!, view.getBigUint64(i * 8, true));
  }
}

let crcTable: Int32Array | undefined;

/** CRC-32 (ISO 3309, gzip's), for the page; Node uses zlib.crc32. */
export function crc32(data: Uint8Array, crc = 0): number {
  if (!crcTable) {
    crcTable = new Int32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c;
    }
  }
  let c = ~crc;
  for (let i = 0; i < data.length; i++) c = crcTable[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/**
 * Splits one gzip member (RFC 1952) into its parts: `push` checks and drops the header and returns the deflate
 * body, always holding back the last 8 bytes seen; `end` returns them as the trailer (CRC-32 and ISIZE), which
 * `checkTrailer` compares with the output. The raw inflater behind it must refuse input after the deflate stream's
 * end (see GZIP_TRAILING): with the trailer held back, any such byte is one more than the member holds.
 */
export class GzipFramer {
  private header: Uint8Array | undefined = new Uint8Array(0);
  private tail: Uint8Array = new Uint8Array(0);
  /** Deflate bytes passed on. */
  bodyBytes = 0;

  push(chunk: Uint8Array): Uint8Array[] {
    let data = chunk;
    if (this.header) {
      const all = concat(this.header, chunk);
      const size = gzipHeaderSize(all);
      if (size === undefined) {
        this.header = all.slice();
        return [];
      }
      this.header = undefined;
      data = all.subarray(size);
    }
    const all = concat(this.tail, data);
    const body = all.subarray(0, Math.max(0, all.length - 8));
    this.tail = all.slice(body.length);
    this.bodyBytes += body.length;
    return body.length > 0 ? [body] : [];
  }

  /** The trailer; throws when the member is incomplete. */
  end(): Uint8Array {
    if (this.header || this.tail.length < 8) throw new IntegrityError('the gzip member is incomplete');
    return this.tail;
  }
}

/** Checks a gzip trailer against the decompressed output's CRC-32 and size. */
export function checkGzipTrailer(trailer: Uint8Array, crc: number, bytes: number): void {
  const view = new DataView(trailer.buffer, trailer.byteOffset, 8);
  if (view.getUint32(0, true) !== crc >>> 0) throw new IntegrityError('the gzip member fails its CRC-32');
  if (view.getUint32(4, true) !== bytes % 2 ** 32) throw new IntegrityError('the gzip member has the wrong size in its trailer');
}

/** The message for input after the deflate stream of the one gzip member. */
export const GZIP_TRAILING = 'the gzip stream has bytes after its one member';

/** The size of the gzip header at the start of `data`, or undefined when more bytes are needed. */
function gzipHeaderSize(data: Uint8Array): number | undefined {
  if (data.length < 10) return undefined;
  if (data[0] !== 0x1f || data[1] !== 0x8b || data[2] !== 8) throw new IntegrityError('the compressed stream is not one gzip member');
  const flags = data[3]!;
  if (flags & 0xe0) throw new IntegrityError('the gzip header has reserved flags set');
  let at = 10;
  if (flags & 4) {
    if (data.length < at + 2) return undefined;
    at += 2 + (data[at]! | (data[at + 1]! << 8));
  }
  for (const flag of [8, 16]) {
    if (!(flags & flag)) continue;
    const zero = data.indexOf(0, at);
    if (zero < 0) {
      if (data.length > 64 * 1024) throw new IntegrityError('the gzip header is too long');
      return undefined;
    }
    at = zero + 1;
  }
  if (flags & 2) {
    if (data.length < at + 2) return undefined;
    if ((crc32(data.subarray(0, at)) & 0xffff) !== (data[at]! | (data[at + 1]! << 8)))
      throw new IntegrityError('the gzip header fails its CRC');
    at += 2;
  }
  return data.length < at ? undefined : at;
}
