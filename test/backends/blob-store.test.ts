/**
 * ONE contract suite for BlobStore, run against the filesystem and against an S3-protocol server on loopback
 * (s3rver). Every round trip compares bytes. Covers streamed puts large enough to go multipart, failures and
 * aborts mid-stream (nothing visible, no parts left), ranges and listing; and, for the stores with the multipart
 * capability (MultipartBlobStore), the multipart API.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { beforeAll, expect, it } from 'vitest';
import { type BlobStore, InvalidPartError, type MultipartBlobStore, UploadNotFoundError } from '../../src/blobs/blob-store.js';
import { FsBlobStore } from '../../src/blobs/fs.js';
import { type S3Engine, S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { tempDir } from '../helpers/tmp.js';
import { describeEngines, type Engine } from './engine.js';

interface BlobEngine<Store extends BlobStore = BlobStore> extends Engine<Store> {
  /** Whether completing with a wrong etag is refused (s3rver does not check part etags). */
  checksPartEtags: boolean;
  /** Incomplete uploads and temporary files the backend still holds. */
  leftovers(): Promise<string[]>;
  /** How many parts the backend holds for an incomplete upload. */
  partFiles(uploadId: string): Promise<number>;
}

function fsEngine(): BlobEngine<MultipartBlobStore> {
  let root: string;
  return {
    name: 'fs',
    checksPartEtags: true,
    async setUp() {
      root = tempDir('coffer-blobs-');
      return new FsBlobStore(root);
    },
    leftovers: async () => [...fs.readdirSync(path.join(root, 'tmp')), ...fs.readdirSync(path.join(root, 'uploads'))],
    partFiles: async (uploadId) => fs.readdirSync(path.join(root, 'uploads', uploadId)).filter((name) => name !== 'key').length,
    async tearDown() {},
  };
}

function s3Engine(kind: S3Engine): BlobEngine<MultipartBlobStore> {
  let s3: TestS3;
  return {
    name: kind === 's3rver' ? 's3' : `s3 (${kind})`,
    skip: skipEngine(kind),
    checksPartEtags: kind !== 's3rver',
    async setUp() {
      s3 = await startS3(kind);
      return s3.store();
    },
    leftovers: () => s3.incompleteUploads(),
    partFiles: async (uploadId) => (await s3.storedParts(uploadId)).length,
    async tearDown() {
      await s3?.close();
    },
  };
}

const MiB = 1024 * 1024;

/** `data` as a stream of 64 KiB chunks, optionally failing (or stalling) after `failAfter` bytes. */
function source(data: Buffer, options: { failAfter?: number; stallAfter?: number } = {}): Readable {
  let offset = 0;
  return new Readable({
    read() {
      if (options.failAfter !== undefined && offset >= options.failAfter) {
        this.destroy(new Error('client went away'));
        return;
      }
      if (options.stallAfter !== undefined && offset >= options.stallAfter) return;
      if (offset >= data.length) {
        this.push(null);
        return;
      }
      const end = Math.min(data.length, offset + 64 * 1024);
      this.push(data.subarray(offset, end));
      offset = end;
    },
  });
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function keys(store: BlobStore, prefix?: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of store.list(prefix)) out.push(entry.key);
  return out.sort();
}

/** Every store. */
const engines = (): BlobEngine[] => [fsEngine(), ...S3_ENGINES.map(s3Engine)];
/** The stores with the multipart capability: both implementations (the filesystem's is an emulation). */
const multipartEngines = (): BlobEngine<MultipartBlobStore>[] => [fsEngine(), ...S3_ENGINES.map(s3Engine)];

describeEngines('BlobStore backend', engines(), (engine, backend) => {
  let store: BlobStore;
  const big = randomBytes(12 * MiB + 12_345); // three 5 MiB-class parts on S3

  beforeAll(() => {
    store = backend();
  });

  it('ping, and put/stat/get/delete of a small blob compare equal', async () => {
    await store.ping();
    const data = randomBytes(1000);
    expect(await store.put('backups/a/b/small.bin', source(data))).toEqual({ size: 1000, version: null, lockedUntil: null });
    expect(await store.stat('backups/a/b/small.bin')).toEqual({ size: 1000, version: null, lockedUntil: null });
    expect((await readAll(await store.get('backups/a/b/small.bin'))).equals(data)).toBe(true);
    await store.delete('backups/a/b/small.bin');
    expect(await store.stat('backups/a/b/small.bin')).toBeNull();
    await store.delete('backups/a/b/small.bin'); // deleting a missing blob is fine
    expect(await store.stat('backups/never/there.bin')).toBeNull();
  });

  it('an empty blob round-trips', async () => {
    expect(await store.put('backups/empty/x.bin', source(Buffer.alloc(0)))).toEqual({ size: 0, version: null, lockedUntil: null });
    expect((await readAll(await store.get('backups/empty/x.bin'))).length).toBe(0);
    await store.delete('backups/empty/x.bin');
  });

  it('a streamed put larger than a part (multipart on S3) round-trips byte for byte, and ranges read back', async () => {
    expect(await store.put('backups/big/one.bin', source(big))).toEqual({ size: big.length, version: null, lockedUntil: null });
    expect(await store.stat('backups/big/one.bin')).toEqual({ size: big.length, version: null, lockedUntil: null });
    expect((await readAll(await store.get('backups/big/one.bin'))).equals(big)).toBe(true);
    const boundary = 5 * MiB;
    for (const [start, end] of [
      [0, 0],
      [0, 99],
      [boundary - 10, boundary + 10],
      [big.length - 1, big.length - 1],
      [1234, big.length - 1],
    ] as const) {
      const part = await readAll(await store.get('backups/big/one.bin', { start, end }));
      expect(part.equals(big.subarray(start, end + 1))).toBe(true);
    }
    expect(await engine.leftovers()).toEqual([]);
  });

  it('a body that fails at once or mid-stream leaves nothing: no blob, no parts, no temp files', async () => {
    // 0: the body fails before the temp file's asynchronous open has finished (that file must not stay behind).
    for (const failAfter of [0, 100_000, 7 * MiB]) {
      await expect(store.put(`backups/fail/${failAfter}.bin`, source(big, { failAfter }))).rejects.toThrow('client went away');
      expect(await store.stat(`backups/fail/${failAfter}.bin`)).toBeNull();
    }
    expect(await keys(store, 'backups/fail/')).toEqual([]);
    expect(await engine.leftovers()).toEqual([]);
  });

  it('an aborted put (client disconnect) leaves nothing, also after parts were sent', async () => {
    for (const stallAfter of [200_000, 11 * MiB]) {
      const controller = new AbortController();
      const put = store.put(`backups/abort/${stallAfter}.bin`, source(big, { stallAfter }), { signal: controller.signal });
      setTimeout(() => controller.abort(new Error('client disconnected')), 300);
      await expect(put).rejects.toThrow();
      expect(await store.stat(`backups/abort/${stallAfter}.bin`)).toBeNull();
    }
    expect(await keys(store, 'backups/abort/')).toEqual([]);
    expect(await engine.leftovers()).toEqual([]);
  });

  it('lists complete blobs by prefix with size and modification time', async () => {
    const before = Date.now() - 5000;
    await store.put('backups/list/a/1.bin', source(Buffer.from('one')));
    await store.put('backups/list/a/2.bin', source(Buffer.from('three')));
    await store.put('backups/list/b/1.bin', source(Buffer.from('x')));
    expect(await keys(store, 'backups/list/a/')).toEqual(['backups/list/a/1.bin', 'backups/list/a/2.bin']);
    expect(await keys(store, 'backups/list/')).toHaveLength(3);
    expect(await keys(store, 'backups/none/')).toEqual([]);
    const entries = [];
    for await (const entry of store.list('backups/list/a/2')) entries.push(entry);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ key: 'backups/list/a/2.bin', size: 5 });
    expect(entries[0]!.modifiedAt).toBeGreaterThan(before);
    expect(entries[0]!.modifiedAt).toBeLessThan(Date.now() + 5000);
    expect(await keys(store)).toEqual(expect.arrayContaining(['backups/list/b/1.bin']));
  });
});

describeEngines('MultipartBlobStore backend', multipartEngines(), (engine, backend) => {
  let store: MultipartBlobStore;

  beforeAll(() => {
    store = backend();
  });

  it('multipart: parts out of order, unsorted completion, invisible until complete, bytes equal', async () => {
    const key = 'backups/mpu/a/attempt.bin';
    const partSize = 5 * MiB;
    const data = randomBytes(2 * partSize + 777);
    const uploadId = await store.createMultipart(key);
    const slices = [data.subarray(0, partSize), data.subarray(partSize, 2 * partSize), data.subarray(2 * partSize)];
    const p3 = await store.putPart(key, uploadId, 3, source(slices[2]!), { size: slices[2]!.length });
    const p1 = await store.putPart(key, uploadId, 1, source(slices[0]!)); // size unknown: also accepted
    const p2 = await store.putPart(key, uploadId, 2, source(slices[1]!), { size: partSize });
    expect(p1.size).toBe(partSize);
    expect(p3.size).toBe(777);
    expect(await store.stat(key)).toBeNull();
    expect(await keys(store, 'backups/mpu/')).toEqual([]);
    const done = await store.completeMultipart(key, uploadId, [
      { partNumber: 2, etag: p2.etag },
      { partNumber: 3, etag: p3.etag },
      { partNumber: 1, etag: p1.etag },
    ]);
    expect(done).toEqual({ size: data.length, version: null, lockedUntil: null });
    expect((await readAll(await store.get(key))).equals(data)).toBe(true);
    expect(await engine.leftovers()).toEqual([]);
    await expect(store.completeMultipart(key, uploadId, [{ partNumber: 1, etag: p1.etag }])).rejects.toBeInstanceOf(UploadNotFoundError);
  });

  it('multipart: a failed part can be sent again; wrong parts are refused', async () => {
    const key = 'backups/mpu/b/attempt.bin';
    const data = randomBytes(300_000);
    const uploadId = await store.createMultipart(key);
    await expect(store.putPart(key, uploadId, 1, source(data, { failAfter: 100_000 }), { size: data.length })).rejects.toThrow();
    await expect(store.putPart(key, uploadId, 1, source(data, { failAfter: 0 }), { size: data.length })).rejects.toThrow();
    expect(await engine.leftovers()).toHaveLength(1); // the upload itself, no temp file of the failed part
    await expect(store.putPart(key, uploadId, 0, source(data))).rejects.toBeInstanceOf(InvalidPartError);
    const part = await store.putPart(key, uploadId, 1, source(data), { size: data.length });
    await expect(store.completeMultipart(key, uploadId, [])).rejects.toBeInstanceOf(InvalidPartError);
    await expect(
      store.completeMultipart(key, uploadId, [
        { partNumber: 1, etag: part.etag },
        { partNumber: 1, etag: part.etag },
      ]),
    ).rejects.toBeInstanceOf(InvalidPartError);
    if (engine.checksPartEtags) {
      await expect(
        store.completeMultipart(key, uploadId, [{ partNumber: 1, etag: '"0123456789abcdef0123456789abcdef"' }]),
      ).rejects.toBeInstanceOf(InvalidPartError);
      await expect(store.completeMultipart(key, uploadId, [{ partNumber: 2, etag: part.etag }])).rejects.toBeInstanceOf(InvalidPartError);
    }
    expect(await store.completeMultipart(key, uploadId, [{ partNumber: 1, etag: part.etag }])).toEqual({
      size: data.length,
      version: null,
      lockedUntil: null,
    });
    expect((await readAll(await store.get(key))).equals(data)).toBe(true);
  });

  it('multipart: a part sent again replaces the earlier copy at once; listParts and listMultipart show what is stored', async () => {
    const key = 'backups/mpu/e/attempt.bin';
    const other = 'backups/mpu/f/attempt.bin';
    const uploadId = await store.createMultipart(key);
    const otherId = await store.createMultipart(other);
    try {
      await store.putPart(key, uploadId, 1, source(randomBytes(1000)), { size: 1000 });
      await store.putPart(key, uploadId, 2, source(randomBytes(300)), { size: 300 });
      const replaced = await store.putPart(key, uploadId, 1, source(randomBytes(700)), { size: 700 });
      expect(await engine.partFiles(uploadId)).toBe(2);
      const parts = (await store.listParts(key, uploadId)).sort((a, b) => a.partNumber - b.partNumber);
      expect(parts.map(({ partNumber, size }) => ({ partNumber, size }))).toEqual([
        { partNumber: 1, size: 700 },
        { partNumber: 2, size: 300 },
      ]);
      expect(parts[0]!.etag).toBe(replaced.etag);
      const listed: string[] = [];
      for await (const upload of store.listMultipart('backups/mpu/e/')) listed.push(`${upload.key} ${upload.uploadId}`);
      expect(listed).toEqual([`${key} ${uploadId}`]);
    } finally {
      await store.abortMultipart(key, uploadId);
      await store.abortMultipart(other, otherId);
    }
    await expect(store.listParts(key, uploadId)).rejects.toBeInstanceOf(UploadNotFoundError);
    const left: string[] = [];
    for await (const upload of store.listMultipart('backups/mpu/')) left.push(upload.key);
    expect(left).toEqual([]);
  });

  it('multipart: abort discards the parts; an unknown upload is UploadNotFoundError', async () => {
    const key = 'backups/mpu/c/attempt.bin';
    const uploadId = await store.createMultipart(key);
    const part = await store.putPart(key, uploadId, 1, source(randomBytes(1000)), { size: 1000 });
    expect(await engine.leftovers()).not.toEqual([]);
    await store.abortMultipart(key, uploadId);
    await store.abortMultipart(key, uploadId); // twice is fine
    expect(await engine.leftovers()).toEqual([]);
    expect(await store.stat(key)).toBeNull();
    await expect(store.completeMultipart(key, uploadId, [{ partNumber: 1, etag: part.etag }])).rejects.toBeInstanceOf(UploadNotFoundError);
    const bogus = engine.name === 'fs' ? '00000000-0000-4000-8000-000000000000' : 'no-such-upload';
    await expect(store.putPart(key, bogus, 1, source(Buffer.from('x')), { size: 1 })).rejects.toBeInstanceOf(UploadNotFoundError);
  });

  it('removeIncomplete discards uploads started before the cutoff, and only those', async () => {
    const key = 'backups/mpu/d/attempt.bin';
    const uploadId = await store.createMultipart(key);
    await store.putPart(key, uploadId, 1, source(randomBytes(1000)), { size: 1000 });
    expect(await store.removeIncomplete(Date.now() - 3_600_000)).toBe(0);
    expect(await engine.leftovers()).toHaveLength(1);
    expect(await store.removeIncomplete(Date.now() + 60_000)).toBe(1);
    expect(await engine.leftovers()).toEqual([]);
    await expect(store.completeMultipart(key, uploadId, [{ partNumber: 1, etag: '"x"' }])).rejects.toBeInstanceOf(UploadNotFoundError);
  });
});
