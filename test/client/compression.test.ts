/**
 * The compressors of a backup write what docs/crypto.md §4 allows, gzip on every core: one gzip member (pigz's way:
 * blocks deflated on their own, joined by sync flushes) or one zstd frame, within compressBound, read back whole by
 * gunzip, by the zstd decoders and by the checked decompressor of a restore.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { decompress as fzstd } from 'fzstd';
import { describe, expect, it } from 'vitest';
import { compressBound, compressor, decompressor, GZIP_BLOCK, zstdAvailable } from '../../src/client/compression.js';
import { ZstdFramer } from '../../src/client/compression-core.js';
import { ChunkPool } from '../../src/client/archive.js';
import { lacking } from '../helpers/required.js';

/** Text and noise, as a tar of real files is: compressible, yet not trivially. */
function sample(bytes: number): Buffer {
  const parts: Buffer[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const part =
      i % 3 === 2 ? randomBytes(4096) : Buffer.from(`line ${i}: the quick brown fox ${i % 97} jumps over ${i % 13}\n`.repeat(40));
    parts.push(part);
    size += part.length;
  }
  return Buffer.concat(parts).subarray(0, bytes);
}

async function compress(kind: 'gzip' | 'zstd', input: Buffer): Promise<Buffer> {
  const pieces = [input.subarray(0, 1000), input.subarray(1000, 700_000), input.subarray(700_000)].filter((p) => p.length > 0);
  const out: Buffer[] = [];
  await pipeline(Readable.from(pieces), compressor(kind), async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) out.push(chunk);
  });
  return Buffer.concat(out);
}

describe('gzip on several threads: one member', () => {
  for (const size of [0, 1, 5000, GZIP_BLOCK, GZIP_BLOCK + 1, 3 * GZIP_BLOCK + 12345]) {
    it(`${size} bytes`, async () => {
      const input = sample(size);
      const gz = await compress('gzip', input);
      expect(zlib.gunzipSync(gz).equals(input)).toBe(true);
      expect((await buffer(Readable.from([gz]).pipe(decompressor('gzip', size)))).equals(input)).toBe(true);
      expect(gz.length).toBeLessThanOrEqual(compressBound('gzip', size));
      // The header is node:zlib's; below one block the whole member is the same bytes as one deflate stream.
      const single = zlib.gzipSync(input, { level: 1 });
      expect(gz.subarray(0, 10)).toEqual(single.subarray(0, 10));
      if (size < GZIP_BLOCK) expect(gz.equals(single)).toBe(true);
    });
  }

  it('deflates several blocks at once in the thread pool: one per core, up to 4, each block given back once deflated', async () => {
    const lanes = Math.min(4, os.availableParallelism());
    const blocks = Array.from({ length: 3 * lanes + 1 }, (_, i) => sample(GZIP_BLOCK).fill(i, 0, 1));
    // Blocks handed to the compressor and not yet given back (deflated), counted as each next one is handed over.
    let handed = 0;
    const released = new Set<Buffer>();
    const deflating: number[] = [];
    async function* source() {
      for (const block of blocks) {
        deflating.push(handed - released.size);
        handed++;
        yield block;
      }
    }
    const out: Buffer[] = [];
    await pipeline(
      source,
      compressor('gzip', 1, (chunk) => released.add(chunk)),
      async (gz: AsyncIterable<Buffer>) => {
        for await (const chunk of gz) out.push(chunk);
      },
    );
    expect(released.size).toBe(blocks.length);
    expect(zlib.gunzipSync(Buffer.concat(out)).equals(Buffer.concat(blocks))).toBe(true);
    // With one lane each block would be deflated before the next is taken (0 in flight each time).
    expect(Math.max(...deflating)).toBe(lanes - 1);
  });

  it('deflates each block on its own: the stream restarts its dictionary at every block', async () => {
    // Three identical blocks: one deflate stream would refer back across a block's end, the blocks of this member cannot.
    const block = sample(GZIP_BLOCK);
    const input = Buffer.concat([block, block, block]);
    const gz = await compress('gzip', input);
    const oneBlock = zlib.deflateRawSync(block, { level: 1, finishFlush: zlib.constants.Z_SYNC_FLUSH });
    expect(gz.subarray(10, 10 + oneBlock.length).equals(oneBlock)).toBe(true);
    expect(gz.subarray(10 + oneBlock.length, 10 + 2 * oneBlock.length).equals(oneBlock)).toBe(true);
    expect(zlib.gunzipSync(gz).equals(input)).toBe(true);
  });

  it('blocks that do not compress (media, encrypted files) are stored, and read back with the others', async () => {
    const input = Buffer.concat([randomBytes(2 * GZIP_BLOCK), sample(GZIP_BLOCK), randomBytes(GZIP_BLOCK / 2)]);
    const gz = await compress('gzip', input);
    expect(zlib.gunzipSync(gz).equals(input)).toBe(true);
    expect((await buffer(Readable.from([gz]).pipe(decompressor('gzip', input.length)))).equals(input)).toBe(true);
    expect(gz.length).toBeLessThanOrEqual(compressBound('gzip', input.length));
    // The first block was stored without a search: level 0 writes stored blocks of 65,531 bytes, level 1 of 16,383.
    expect(gz[10]! & 0b110).toBe(0);
    expect(gz.readUInt16LE(11)).toBe(65531);
  });

  it('a gzip member with a second one after it is still refused on restore', async () => {
    const gz = await compress('gzip', sample(GZIP_BLOCK + 10));
    const twice = Buffer.concat([gz, gz]);
    await expect(buffer(Readable.from([twice]).pipe(decompressor('gzip', 2 * (GZIP_BLOCK + 10))))).rejects.toThrow(/after its one member/);
  });
});

describe('zstd: a frame that ends with an empty last block', () => {
  it('is one whole frame to the restore', async () => {
    const text = Buffer.from('one frame, its data in a raw block, then an empty raw block that ends it');
    const rawBlock = (body: Buffer, last: boolean) => {
      const header = (body.length << 3) | (last ? 1 : 0);
      return Buffer.concat([Buffer.from([header & 0xff, (header >> 8) & 0xff, header >> 16]), body]);
    };
    // Magic, a single-segment frame header with a one-byte content size, the data, the empty last block.
    const frame = Buffer.concat([
      Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, text.length]),
      rawBlock(text, false),
      rawBlock(Buffer.alloc(0), true),
    ]);
    expect(await buffer(Readable.from([frame]).pipe(decompressor('zstd', text.length)))).toEqual(text);
    expect(await buffer(Readable.from([frame]).pipe(decompressor('zstd', text.length, { native: false })))).toEqual(text);
  });
});

// compress() queues chunks behind the first and ends the input while they wait: node:zlib alone then writes a second frame.
describe.skipIf(lacking(zstdAvailable(), 'node:zstd'))('zstd: one frame', () => {
  for (const size of [0, 5000, 3 * GZIP_BLOCK + 12345]) {
    it(`${size} bytes`, async () => {
      const input = sample(size);
      const frame = await compress('zstd', input);
      const framer = new ZstdFramer(size);
      framer.push(frame);
      framer.end();
      expect(Buffer.from(fzstd(frame)).equals(input)).toBe(true);
      expect((await buffer(Readable.from([frame]).pipe(decompressor('zstd', size)))).equals(input)).toBe(true);
      expect(frame.length).toBeLessThanOrEqual(compressBound('zstd', size));
    });
  }
});

describe("the tar writer's recycled chunks", () => {
  for (const kind of ['gzip', 'zstd'] as const) {
    const skip = kind === 'zstd' && lacking(zstdAvailable(), 'node:zstd');
    it.skipIf(skip)(`${kind}: gives each chunk back once consumed; a chunk filled again at once changes nothing`, async () => {
      const input = sample(4 * GZIP_BLOCK + 4321);
      const pool = new ChunkPool(GZIP_BLOCK, 1);
      const released: Buffer[] = [];
      // Whole blocks (deflated where they lie) and pieces that straddle blocks (gathered), each chunk from the pool:
      // one released too early would be overwritten by the next piece before it was compressed.
      const sizes = [GZIP_BLOCK, 1000, GZIP_BLOCK, GZIP_BLOCK - 1000, GZIP_BLOCK, 4321];
      async function* pieces() {
        let at = 0;
        for (const n of sizes) {
          const chunk = pool.get();
          input.copy(chunk, 0, at, at + n);
          at += n;
          yield chunk.subarray(0, n);
        }
      }
      const out: Buffer[] = [];
      const release = (chunk: Buffer) => {
        released.push(chunk);
        pool.release(chunk);
      };
      await pipeline(pieces, compressor(kind, 1, release), async (source: AsyncIterable<Buffer>) => {
        for await (const chunk of source) out.push(chunk);
      });
      const compressed = Buffer.concat(out);
      expect(released.length).toBe(sizes.length);
      if (kind === 'gzip') expect(compressed.equals(await compress('gzip', input))).toBe(true);
      else expect(Buffer.from(fzstd(compressed)).equals(input)).toBe(true);
    });
  }

  it('the pool hands out a chunk again only once it was given back, and takes back only its own', () => {
    const pool = new ChunkPool(1024, 4);
    const a = pool.get();
    const b = pool.get();
    expect(a.buffer).not.toBe(b.buffer);
    pool.release(Buffer.alloc(1024)); // not the pool's
    pool.release(a.subarray(0, 10));
    pool.release(a); // a second time: ignored
    const c = pool.get();
    const d = pool.get();
    expect(c.buffer).toBe(a.buffer);
    expect(d.buffer).not.toBe(a.buffer);
    expect(d.buffer).not.toBe(b.buffer);
  });
});
