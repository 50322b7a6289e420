/**
 * The extractor's concurrency (src/client/extract.ts): file-system work runs in worker threads, each directory
 * owned by one, with a bounded look-ahead. These tests feed real tar bytes into extractInto() and check what lands
 * on disk: many directories at once, a large file among small ones, a hard link to a file still being written,
 * the look-ahead bound holding (the stream's write callback waits), and a failure with jobs in flight (the
 * stream ends only when none is pending, so the caller's removal of staging leaves nothing behind).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IntegrityError } from '../../src/client/envelope.js';
import { closed, extractInto, placeTree, UnsafeArchiveError } from '../../src/client/extract.js';
import type { ExtractLimits } from '../../src/client/extract-lanes.js';
import { tempDir } from '../helpers/tmp.js';
import { snapshot, tarArchive, tarEntry, type TarEntrySpec } from './helpers.js';

const MTIME = new Date('2024-05-06T07:08:09Z');
const sha = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const chunked = (data: Buffer, size: number) =>
  Array.from({ length: Math.ceil(data.length / size) }, (_, i) => data.subarray(i * size, (i + 1) * size));
/** Deterministic bytes that differ per file. */
const bytes = (seed: number, length: number) => {
  const out = Buffer.alloc(length);
  for (let i = 0, x = seed * 2654435761; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
};

/** `dirs` directories (each with a nested one) holding `files` small files between them, in archive order. */
function smallTree(dirs: number, files: number): TarEntrySpec[] {
  const entries: TarEntrySpec[] = [];
  for (let d = 0; d < dirs; d++) {
    entries.push({ type: 'Directory', path: `d${d}/`, mode: 0o750, mtime: MTIME });
    entries.push({ type: 'Directory', path: `d${d}/nested/`, mode: 0o705, mtime: MTIME });
  }
  for (let i = 0; i < files; i++) {
    const dir = `d${i % dirs}${i % 3 === 0 ? '/nested' : ''}`;
    entries.push({ path: `${dir}/f${i}.txt`, body: bytes(i, 1 + ((i * 977) % 6000)), mode: i % 2 ? 0o640 : 0o604, mtime: MTIME });
  }
  return entries;
}

/** The state placeTree leaves for `entries` (files and directories only), as test/client/helpers.ts snapshots it. */
function expected(entries: TarEntrySpec[]) {
  const out: Record<string, unknown> = {};
  for (const e of entries) {
    const key = e.path.replace(/\/$/, '');
    if (e.type === 'Directory') out[key] = { type: 'dir', mode: e.mode, mtime: MTIME.getTime() / 1000 };
    else if ((e.type ?? 'File') === 'File') {
      const body = Buffer.from(e.body ?? '');
      out[key] = { type: 'file', mode: e.mode, mtime: MTIME.getTime() / 1000, size: body.length, sha256: sha(body) };
    }
  }
  return out;
}

/** Sum of the sizes of the regular files below `dir` now. */
function bytesOnDisk(dir: string): number {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += fs.lstatSync(path.join(entry.parentPath, entry.name)).size;
  }
  return total;
}

const writeChunk = (sink: Writable, chunk: Buffer) =>
  new Promise<void>((resolve, reject) => sink.write(chunk, (error) => (error ? reject(error) : resolve())));

/** Every path below `dir` now. */
const listing = (dir: string) => (fs.readdirSync(dir, { recursive: true }) as string[]).sort();

/**
 * Whether anything below `dir` still appears after the extractor ended: a creation it left running would show up
 * (hundreds were queued when these tests fail); a correct extractor has nothing left to create.
 */
async function changesAfterEnd(dir: string): Promise<boolean> {
  const before = listing(dir);
  await new Promise((resolve) => setTimeout(resolve, 200));
  return JSON.stringify(listing(dir)) !== JSON.stringify(before);
}

describe('extractInto with its file-system work in flight', () => {
  let work: string;
  beforeAll(() => {
    work = tempDir('coffer-extract-conc-');
  });
  afterAll(async () => {
    if (work) await fsp.rm(work, { recursive: true, force: true });
  });

  async function extract(entries: TarEntrySpec[], chunkBytes: number, limits?: ExtractLimits) {
    const target = await fsp.mkdtemp(path.join(work, 'target-'));
    const staging = await fsp.mkdtemp(path.join(target, '.coffer-restore-'));
    const sink = extractInto(staging, { limits });
    await pipeline(Readable.from(chunked(tarArchive(entries), chunkBytes)), sink);
    await placeTree(staging, target, false, sink.directories);
    return { target, sink };
  }

  it('restores many directories filled at the same time, every byte, mode and mtime in place', async () => {
    const entries = smallTree(40, 600);
    for (const [chunkBytes, limits] of [
      [65536, undefined],
      [777, { workers: 4, aheadEntries: 50 }],
    ] as const) {
      const { target, sink } = await extract(entries, chunkBytes, limits);
      expect(sink.entries).toBe(entries.length);
      expect(await snapshot(target)).toEqual(expected(entries));
    }
  });

  it('writes a large file among small ones in order, also with a look-ahead far smaller than the file', async () => {
    const large = bytes(99, 3 * 1024 * 1024 + 17);
    const entries = smallTree(4, 40);
    entries.splice(30, 0, { path: 'd1/large.bin', body: large, mode: 0o600, mtime: MTIME });
    entries.push({ path: 'd2/after.txt', body: 'after the large one', mode: 0o644, mtime: MTIME });
    for (const limits of [undefined, { aheadBytes: 1000, aheadEntries: 1, workers: 1 }]) {
      const { target } = await extract(entries, 65536, limits);
      expect(await snapshot(target)).toEqual(expected(entries));
    }
  });

  it('links to a file whose content is still on its way, from its own and from other directories', async () => {
    const large = bytes(7, 2 * 1024 * 1024);
    const entries: TarEntrySpec[] = [
      { type: 'Directory', path: 'a/', mode: 0o755, mtime: MTIME },
      { type: 'Directory', path: 'b/', mode: 0o755, mtime: MTIME },
      { path: 'a/big.bin', body: large, mode: 0o640, mtime: MTIME },
      { type: 'Link', path: 'b/same.bin', linkpath: 'a/big.bin', mtime: MTIME },
      { type: 'Link', path: 'a/again.bin', linkpath: 'b/same.bin', mtime: MTIME },
      { type: 'Link', path: 'c/deeper/third.bin', linkpath: 'a/big.bin', mtime: MTIME },
    ];
    for (const limits of [undefined, { aheadBytes: 100, aheadEntries: 1 }]) {
      const { target } = await extract(entries, 4096, limits);
      const inode = (await fsp.lstat(path.join(target, 'a/big.bin'))).ino;
      for (const name of ['a/big.bin', 'b/same.bin', 'a/again.bin', 'c/deeper/third.bin']) {
        const stat = await fsp.lstat(path.join(target, name));
        expect(stat.ino).toBe(inode);
        expect(stat.mode & 0o7777).toBe(0o640);
        expect(sha(await fsp.readFile(path.join(target, name)))).toBe(sha(large));
      }
    }
  });

  it('holds the write callback while the look-ahead is full: content accepted is never far ahead of the disk', async () => {
    const entries = smallTree(8, 300);
    const tar = tarArchive(entries);
    // Where each file's content lies in the tar stream, to know how much content a given prefix holds.
    const spans: { start: number; length: number }[] = [];
    let offset = 0;
    for (const entry of entries) {
      const size = tarEntry(entry).length;
      const length = entry.type === 'Directory' ? 0 : Buffer.from(entry.body ?? '').length;
      spans.push({ start: offset + 512, length });
      offset += size;
    }
    const contentBefore = (end: number) => spans.reduce((sum, s) => sum + Math.max(0, Math.min(s.length, end - s.start)), 0);
    const aheadBytes = 2048;
    const chunkBytes = 4096;
    const target = await fsp.mkdtemp(path.join(work, 'target-'));
    const staging = await fsp.mkdtemp(path.join(target, '.coffer-restore-'));
    const sink = extractInto(staging, { limits: { aheadBytes, aheadEntries: 4 } });
    let accepted = 0;
    let worstLag = 0;
    for (const chunk of chunked(tar, chunkBytes)) {
      await writeChunk(sink, chunk);
      accepted += chunk.length;
      worstLag = Math.max(worstLag, contentBefore(accepted) - bytesOnDisk(staging));
    }
    await new Promise<void>((resolve, reject) => sink.end((error?: Error | null) => (error ? reject(error) : resolve())));
    // The bound, plus what one chunk of input can add before the callback is held.
    expect(worstLag).toBeLessThanOrEqual(aheadBytes + chunkBytes);
    expect(bytesOnDisk(staging)).toBe(contentBefore(tar.length));
    await placeTree(staging, target, false, sink.directories);
    expect(await snapshot(target)).toEqual(expected(entries));
  });

  it('fails on a refused entry behind hundreds of pending jobs only once none is in flight, leaving nothing after removing staging', async () => {
    const root = await fsp.mkdtemp(path.join(work, 'fail-'));
    const outside = path.join(root, 'outside');
    await fsp.mkdir(outside);
    const entries = [
      ...smallTree(30, 900),
      { type: 'SymbolicLink' as const, path: 'd3/out', linkpath: outside },
      { path: 'd3/out/pwned.txt', body: 'pwned' },
      ...smallTree(3, 30).map((e) => ({ ...e, path: `late/${e.path}` })),
    ];
    const target = path.join(root, 'target');
    await fsp.mkdir(target);
    const staging = await fsp.mkdtemp(path.join(target, '.coffer-restore-'));
    const sink = extractInto(staging);
    const failure = await pipeline(Readable.from(chunked(tarArchive(entries), 65536)), sink).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(UnsafeArchiveError);
    expect(String(failure)).toMatch(/written through a symlink/);
    expect(await changesAfterEnd(staging)).toBe(false);
    // The earlier entries were all written (they precede the refusal), nothing after it was.
    expect(fs.existsSync(path.join(staging, 'd29/f899.txt'))).toBe(true);
    expect(fs.existsSync(path.join(staging, 'late'))).toBe(false);
    await fsp.rm(staging, { recursive: true });
    expect(await fsp.readdir(target)).toEqual([]);
    expect(await fsp.readdir(outside)).toEqual([]);
  });

  it('ends after a failure upstream with creations in flight only once they settled (destroy waits)', async () => {
    const target = await fsp.mkdtemp(path.join(work, 'target-'));
    const staging = await fsp.mkdtemp(path.join(target, '.coffer-restore-'));
    const tar = tarArchive(smallTree(30, 900));
    const broken = new Error('the download broke off');
    async function* source() {
      yield* chunked(tar.subarray(0, Math.floor(tar.length / 2)), 65536);
      throw broken;
    }
    const sink = extractInto(staging);
    await expect(pipeline(Readable.from(source()), sink)).rejects.toBe(broken);
    // The pipeline rejects as soon as its source fails; the sink closes once its jobs settled.
    await closed(sink);
    expect(await changesAfterEnd(staging)).toBe(false);
    await fsp.rm(staging, { recursive: true });
    expect(await fsp.readdir(target)).toEqual([]);
  });

  it('reports a tar stream cut inside a file as an invalid archive, after its jobs settled', async () => {
    const target = await fsp.mkdtemp(path.join(work, 'target-'));
    const staging = await fsp.mkdtemp(path.join(target, '.coffer-restore-'));
    const tar = tarArchive([...smallTree(5, 50), { path: 'd1/cut.bin', body: bytes(3, 100_000) }]);
    const sink = extractInto(staging);
    const failure = await pipeline(Readable.from(chunked(tar.subarray(0, tar.length - 60_000), 8192)), sink).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(IntegrityError);
    expect(await changesAfterEnd(staging)).toBe(false);
    await fsp.rm(staging, { recursive: true });
  });
});
