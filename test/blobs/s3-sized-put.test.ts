/** S3BlobStore.put with a known size: one streamed PutObject (no parts held in memory), same guarantees. */
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { setTimeout } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestS3, startS3 } from '../helpers/s3.js';

const bytes = (size: number) => Buffer.from(Array.from({ length: size }, (_, i) => (i * 131 + 7) & 0xff));

async function read(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('S3BlobStore.put with a known size', () => {
  let s3: TestS3;
  beforeAll(async () => {
    s3 = await startS3('s3rver', 'coffer-sized-put');
  });
  afterAll(async () => {
    await s3?.close();
  });

  it('stores a body larger than one multipart part byte for byte, with no multipart upload', async () => {
    const store = s3.store();
    // Every request the store's S3 client sends, by command.
    const sent: string[] = [];
    store.client.middlewareStack.add(
      (next, context) => (args) => {
        sent.push(context.commandName ?? '?');
        return next(args);
      },
      { step: 'initialize', name: 'countCommands' },
    );
    const data = bytes(6 * 1024 * 1024 + 123);
    expect(
      await store.put('backups/a/b/sized.bin', Readable.from([data.subarray(0, 1000), data.subarray(1000)]), { size: data.length }),
    ).toEqual({ size: data.length, version: null, lockedUntil: null });
    // One PutObject, no CreateMultipartUpload/UploadPart/CompleteMultipartUpload.
    expect(sent).toEqual(['PutObjectCommand']);
    expect((await read(await store.get('backups/a/b/sized.bin'))).equals(data)).toBe(true);
    expect(await s3.incompleteUploads()).toEqual([]);
  });

  it('leaves nothing behind when the body fails before its announced end', async () => {
    const store = s3.store();
    const body = new Readable({ read() {} });
    body.push(bytes(64 * 1024));
    // s3rver keeps the bytes of a PutObject cut short: fail the body only once s3rver has its file, so the
    // store's clean-up is what has to remove it (failing earlier raced s3rver creating the file after it).
    const holding = async () => {
      while (!fs.existsSync(s3.objectFile!('backups/a/b/broken.bin'))) await setTimeout(5);
      body.destroy(new Error('client went away'));
    };
    const [put] = await Promise.allSettled([store.put('backups/a/b/broken.bin', body, { size: 1024 * 1024 }), holding()]);
    expect(put.status).toBe('rejected');
    expect(await store.stat('backups/a/b/broken.bin')).toBeNull();
  });
});
