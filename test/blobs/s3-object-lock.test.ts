/**
 * S3BlobStore with Object Lock (governance) on Ceph's RADOS Gateway, a bucket created with Object Lock: a sized put
 * carries its retention and answers its version; stat, get and ranges read a given version whatever was put at the
 * key since; delete removes every version and delete marker of exactly that key, and a locked version makes it throw
 * BlobLockedError with the lock's end (the rest is removed); lock() sets the retention of a version. The bucket is
 * emptied with BypassGovernanceRetention by the test (never by the store).
 */
import { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectRetentionCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobLockedError } from '../../src/blobs/blob-store.js';
import { S3BlobStore } from '../../src/blobs/s3.js';
import { lockBucket, skipEngine, startS3, type LockBucket, type TestS3 } from '../helpers/s3.js';

const read = async (stream: Readable) => {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

describe.skipIf(skipEngine('ceph'))('S3BlobStore with Object Lock (Ceph)', () => {
  let s3: TestS3;
  let locked: LockBucket;
  let client: S3Client;
  let bucket: string;
  let store: S3BlobStore;

  const versions = async (key: string) => (await locked.versions(key)).filter((v) => v.key === key).map((v) => v.version);

  beforeAll(async () => {
    s3 = await startS3('ceph');
    locked = await lockBucket(s3);
    ({ client, name: bucket } = locked);
    store = new S3BlobStore({ ...s3.options, bucket, objectLock: 'governance' });
  });
  afterAll(async () => {
    await locked?.remove(true);
    await s3?.close();
  });

  it('the bucket reports Object Lock enabled; the test bucket without it, disabled', async () => {
    expect(await store.bucketObjectLock()).toEqual({ state: 'enabled' });
    expect(await s3.store().bucketObjectLock()).toEqual({ state: 'disabled' });
  });

  it('a sized put is locked in the same request, read by its version; delete is refused with the lock’s end', async () => {
    const until = Date.now() + 3_600_000;
    const key = 'backups/a/b/locked.bin';
    const data = Buffer.from('the backup');
    const stored = await store.put(key, Readable.from([data]), { size: data.length, lockUntil: until });
    expect(stored).toEqual({ size: data.length, version: expect.any(String), lockedUntil: until });
    const retention = await client.send(new GetObjectRetentionCommand({ Bucket: bucket, Key: key, VersionId: stored.version! }));
    expect(retention.Retention).toEqual({ Mode: 'GOVERNANCE', RetainUntilDate: new Date(until) });

    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'an overwrite' }));
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })); // a delete marker on top
    expect(await store.stat(key)).toBeNull();
    expect(await store.stat(key, stored.version)).toEqual(stored);
    expect((await read(await store.get(key, undefined, stored.version))).equals(data)).toBe(true);
    expect((await read(await store.get(key, { start: 4, end: 9 }, stored.version))).toString()).toBe('backup');

    const refused = await store.delete(key).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(BlobLockedError);
    expect(refused).toMatchObject({ key, lockedUntil: until });
    // The overwrite and the delete marker went; the locked version stays.
    expect(await versions(key)).toEqual([stored.version]);
  });

  it('an unlocked object, its overwrites and delete markers all go; lock() locks a version written without one', async () => {
    const key = 'backups/a/b/plain.bin';
    const stored = await store.put(key, Readable.from([Buffer.from('x')]), { size: 1 });
    expect(stored.lockedUntil).toBeNull();
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'y' }));
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    expect(await versions(key)).toHaveLength(3);
    await store.delete(key);
    expect(await versions(key)).toEqual([]);

    const later = await store.put(key, Readable.from([Buffer.from('z')]), { size: 1 });
    const until = Date.now() + 3_600_000;
    await store.lock(key, later.version, until);
    expect(await store.stat(key, later.version)).toEqual({ ...later, lockedUntil: until });
    await expect(store.delete(key)).rejects.toBeInstanceOf(BlobLockedError);
  });

  it('a multipart upload answers its version; Ceph ignores the lock of its creation, which stat shows', async () => {
    const key = 'backups/a/b/multi.bin';
    const uploadId = await store.createMultipart(key, { lockUntil: Date.now() + 3_600_000 });
    const part = await store.putPart(key, uploadId, 1, Readable.from([Buffer.from('parts')]), { size: 5 });
    const stored = await store.completeMultipart(key, uploadId, [{ partNumber: 1, etag: part.etag }]);
    expect(stored).toEqual({ size: 5, version: expect.any(String), lockedUntil: null });
    await store.delete(key);
    expect(await versions(key)).toEqual([]);
  });
});
