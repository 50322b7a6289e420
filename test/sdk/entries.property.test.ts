/**
 * The application API's tar layer (src/client/app/entries.ts), without a server:
 *  - named entries packed and read back are the same entries (names, bytes, mtimes to the second), whatever the
 *    chunking, with long and non-ASCII names (pax headers);
 *  - node-tar (what the CLI's restore reads with) reads the packed stream as the same entries, and readEntries
 *    reads node-tar's own archives;
 *  - hostile input (a valid archive with bytes changed, cut short or grown, or random bytes) either reads as
 *    entries with safe names whose contents add up to no more than the input, or fails with TarFormatError:
 *    never another error, never a name outside the root.
 */
import { Readable } from 'node:stream';
import fc from 'fast-check';
import * as tar from 'tar';
import { describe, expect, it } from 'vitest';
import { packEntries, readEntries, TarFormatError, type NamedEntry } from '../../src/client/app/entries.js';
import { tarArchive } from '../client/helpers.js';

const concat = (parts: Uint8Array[]) => Buffer.concat(parts.map((part) => Buffer.from(part.buffer, part.byteOffset, part.length)));

async function pack(entries: NamedEntry[]): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of packEntries(entries)) parts.push(part);
  return concat(parts);
}

/** `bytes` as a stream of pieces cut at `cuts` (fractions of the length). */
async function* pieces(bytes: Uint8Array, cuts: number[]): AsyncGenerator<Uint8Array> {
  const points = [...new Set(cuts.map((cut) => Math.floor(cut * bytes.length)))].sort((a, b) => a - b);
  let from = 0;
  for (const point of [...points, bytes.length]) {
    if (point > from) yield bytes.subarray(from, point);
    from = Math.max(from, point);
  }
}

async function readAll(source: AsyncIterable<Uint8Array>) {
  const out: { name: string; type: string; mtime: number; bytes: Buffer; linkTarget?: string }[] = [];
  for await (const entry of readEntries(source)) {
    const parts: Uint8Array[] = [];
    for await (const part of entry.stream as unknown as AsyncIterable<Uint8Array>) parts.push(part);
    out.push({ name: entry.name, type: entry.type, mtime: entry.mtime.getTime(), bytes: concat(parts), linkTarget: entry.linkTarget });
  }
  return out;
}

const segment = fc.oneof(
  fc.constantFrom('a', 'data', 'é', 'e\u0301', '日本', 'with space', 'x'.repeat(60)),
  fc.string({ minLength: 1, maxLength: 12 }).filter((s) => !/[/\\\0]/.test(s) && s !== '.' && s !== '..'),
);
const entryName = fc
  .array(segment, { minLength: 1, maxLength: 4 })
  .map((parts) => parts.join('/'))
  .filter((name) => !/^[A-Za-z]:/.test(name));
const namedEntries = fc.uniqueArray(
  fc.record({
    name: entryName,
    bytes: fc.uint8Array({ maxLength: 3000 }),
    seconds: fc.integer({ min: 0, max: 2 ** 33 }),
    form: fc.constantFrom('bytes', 'blob', 'stream', 'iterable', 'sized-iterable'),
  }),
  { selector: (entry) => entry.name, maxLength: 6 },
);

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    pull(controller) {
      const next = chunks.shift();
      if (next === undefined) controller.close();
      else controller.enqueue(next);
    },
  });
}

function asEntry(spec: { name: string; bytes: Uint8Array; seconds: number; form: string }): NamedEntry {
  const mtime = new Date(spec.seconds * 1000);
  const half = Math.floor(spec.bytes.length / 2);
  const chunks = [spec.bytes.subarray(0, half), spec.bytes.subarray(half)];
  switch (spec.form) {
    case 'blob':
      return { name: spec.name, mtime, data: new Blob([spec.bytes as Uint8Array<ArrayBuffer>]) };
    case 'stream':
      return { name: spec.name, mtime, data: streamOf(chunks), size: spec.bytes.length };
    case 'iterable':
      return { name: spec.name, mtime, data: chunks };
    case 'sized-iterable':
      return { name: spec.name, mtime, data: chunks, size: spec.bytes.length };
    default:
      return { name: spec.name, mtime, data: spec.bytes };
  }
}

describe('SDK entries: the tar layer of the application API', () => {
  it('packs named entries and reads them back as they were, in any chunking', async () => {
    await fc.assert(
      fc.asyncProperty(namedEntries, fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 8 }), async (specs, cuts) => {
        const archive = await pack(specs.map(asEntry));
        const read = await readAll(pieces(archive, cuts));
        expect(read).toEqual(
          specs.map((spec) => ({
            name: spec.name,
            type: 'file',
            mtime: spec.seconds * 1000,
            bytes: Buffer.from(spec.bytes),
            linkTarget: undefined,
          })),
        );
      }),
      { numRuns: 150 },
    );
  });

  it('writes what node-tar (the CLI restore) reads, and reads what node-tar writes', async () => {
    await fc.assert(
      fc.asyncProperty(namedEntries, async (specs) => {
        const archive = await pack(specs.map(asEntry));
        const seen: { name: string; bytes: Buffer; mtime: number }[] = [];
        const parser = new tar.Parser({ strict: true });
        parser.on('entry', (entry: tar.ReadEntry) => {
          if (entry.path === './') return entry.resume();
          const parts: Buffer[] = [];
          entry.on('data', (part: Buffer) => parts.push(part));
          entry.on('end', () => seen.push({ name: entry.path, bytes: Buffer.concat(parts), mtime: entry.mtime!.getTime() }));
        });
        await new Promise<void>((resolve, reject) => {
          parser.on('error', reject);
          parser.on('end', () => resolve());
          parser.end(archive);
        });
        expect(seen).toEqual(specs.map((spec) => ({ name: spec.name, bytes: Buffer.from(spec.bytes), mtime: spec.seconds * 1000 })));
      }),
      { numRuns: 60 },
    );
    const written = tarArchive([
      { path: 'dir/', type: 'Directory' },
      { path: 'dir/file.txt', body: 'hello' },
      { path: 'dir/link', type: 'SymbolicLink', linkpath: 'file.txt' },
      { path: 'dir/hard', type: 'Link', linkpath: 'dir/file.txt' },
    ]);
    const read = await readAll(Readable.from([written]));
    expect(read.map(({ name, type, bytes, linkTarget }) => ({ name, type, text: bytes.toString(), linkTarget }))).toEqual([
      { name: 'dir', type: 'directory', text: '', linkTarget: undefined },
      { name: 'dir/file.txt', type: 'file', text: 'hello', linkTarget: undefined },
      { name: 'dir/link', type: 'symlink', text: '', linkTarget: 'file.txt' },
      { name: 'dir/hard', type: 'link', text: '', linkTarget: 'dir/file.txt' },
    ]);
  });

  it('refuses names that are not relative paths of plain segments when packing', async () => {
    for (const name of ['', 'C:/drive', '/abs', '../up', 'a/../b', 'a//b', './a', 'a\\b', 'nul\0']) {
      await expect(pack([{ name, data: new Uint8Array(1) }])).rejects.toThrow(TypeError);
    }
    await expect(pack([{ name: 'short', data: [new Uint8Array(3)], size: 4 }])).rejects.toThrow(/declared 4 bytes/);
    await expect(
      pack([
        { name: 'twice', data: new Uint8Array(0) },
        { name: 'twice', data: new Uint8Array(0) },
      ]),
    ).rejects.toThrow(/twice/);
  });

  it('reads hostile input as safe entries or refuses it with TarFormatError, nothing else', async () => {
    for (const hostile of ['../escape', 'a/../../escape', '/etc/passwd', 'C:/windows']) {
      await expect(readAll(Readable.from([tarArchive([{ path: hostile, body: 'x' }])])), hostile).rejects.toThrow(TarFormatError);
    }
    const base = fc.oneof(
      namedEntries.chain((specs) => fc.constant(specs)).map((specs) => ({ kind: 'packed' as const, specs })),
      fc.uint8Array({ minLength: 0, maxLength: 4096 }).map((bytes) => ({ kind: 'random' as const, bytes })),
    );
    const damage = fc.record({
      flips: fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }), fc.integer({ min: 0, max: 255 })), {
        maxLength: 6,
      }),
      cut: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(base, damage, async (input, { flips, cut }) => {
        const bytes = input.kind === 'random' ? Buffer.from(input.bytes) : await pack(input.specs.map(asEntry));
        for (const [at, value] of flips) if (bytes.length > 0) bytes[Math.floor(at * bytes.length)] = value;
        const hostile = cut === undefined ? bytes : bytes.subarray(0, Math.floor(cut * bytes.length));
        try {
          const read = await readAll(pieces(hostile, [0.3, 0.7]));
          const total = read.reduce((sum, entry) => sum + entry.bytes.length, 0);
          expect(total).toBeLessThanOrEqual(hostile.length);
          for (const entry of read) {
            expect(entry.name.startsWith('/')).toBe(false);
            expect(entry.name.split('/')).not.toContain('..');
          }
        } catch (error) {
          expect(error).toBeInstanceOf(TarFormatError);
        }
      }),
      { numRuns: 400 },
    );
  });
});
