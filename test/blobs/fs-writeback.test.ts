/**
 * The fs store sends a blob's pages to the disk while the body still arrives (Writeback: an fdatasync every
 * WRITEBACK_BYTES, in the background, on a read-only descriptor of its own), so the fsync before the answer finds
 * little left to write (BENCHMARKS.md, P1). What must hold: the flushes start while the bytes pass, the bytes are
 * stored unchanged, and no descriptor of the file stays open afterwards, whether the write succeeds or fails.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { FsBlobStore, WRITEBACK_BYTES, Writeback } from '../../src/blobs/fs.js';
import { tempDir } from '../helpers/tmp.js';

/** The descriptors of this process open on a file under `dir` (from /proc/self/fd). */
function openUnder(dir: string): string[] {
  const open: string[] = [];
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(dir)) open.push(target);
    } catch {
      // closed between readdir and readlink
    }
  }
  return open;
}

/** A digest to compare large bodies by (a deep equality over megabytes of bytes takes minutes). */
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

function chunks(count: number, size: number): Buffer[] {
  return Array.from({ length: count }, (_, i) => Buffer.alloc(size, i + 1));
}

describe('Writeback', () => {
  it('starts background flushes while the bytes pass, passes them unchanged and closes its descriptor', async () => {
    const dir = tempDir('coffer-writeback-');
    const file = path.join(dir, 'file');
    const every = 64 * 1024;
    const writeback = new Writeback(file, every);
    const parts = chunks(16, 32 * 1024); // 8 × every
    await pipeline(Readable.from(parts), writeback.tap, fs.createWriteStream(file, { flush: true })).finally(() => writeback.close());
    expect(writeback.started).toBeGreaterThanOrEqual(1);
    expect(sha256(fs.readFileSync(file))).toBe(sha256(Buffer.concat(parts)));
    expect(openUnder(dir)).toEqual([]);
  });

  it('starts none for a body under its threshold', async () => {
    const dir = tempDir('coffer-writeback-');
    const file = path.join(dir, 'file');
    const writeback = new Writeback(file, 64 * 1024);
    await pipeline(Readable.from(chunks(1, 1024)), writeback.tap, fs.createWriteStream(file, { flush: true })).finally(() =>
      writeback.close(),
    );
    expect(writeback.started).toBe(0);
    expect(openUnder(dir)).toEqual([]);
  });
});

describe('FsBlobStore.put with writeback', () => {
  it('stores a body of several WRITEBACK_BYTES byte-exact and leaves no descriptor open', async () => {
    const root = tempDir('coffer-writeback-store-');
    const store = new FsBlobStore(root);
    const parts = chunks(3 * (WRITEBACK_BYTES / 65536), 65536); // 3 × WRITEBACK_BYTES, in a socket's read size
    await expect(store.put('backups/a/b/blob.bin', Readable.from(parts))).resolves.toEqual({
      size: 3 * WRITEBACK_BYTES,
      version: null,
      lockedUntil: null,
    });
    // Checked first: reading megabytes back may collect an unclosed handle (Node closes those on garbage collection).
    expect(openUnder(root)).toEqual([]);
    expect(sha256(await buffer(await store.get('backups/a/b/blob.bin')))).toBe(sha256(Buffer.concat(parts)));
    expect(fs.readdirSync(path.join(root, 'tmp'))).toEqual([]);
  });

  it('a body that fails after a flush started leaves no temp file and no descriptor open', async () => {
    const root = tempDir('coffer-writeback-store-');
    const store = new FsBlobStore(root);
    const body = new PassThrough();
    const put = store.put('backups/a/b/blob.bin', body);
    for (const part of chunks(1.5 * (WRITEBACK_BYTES / 65536), 65536)) body.write(part);
    // Once the writer has the bytes past the threshold, the flusher has its own descriptor on the temp file.
    await expect.poll(() => openUnder(path.join(root, 'tmp')).length).toBeGreaterThanOrEqual(2);
    body.destroy(new Error('the client went away'));
    await expect(put).rejects.toThrow('the client went away');
    expect(openUnder(root)).toEqual([]);
    expect(fs.readdirSync(path.join(root, 'tmp'))).toEqual([]);
  });
});
