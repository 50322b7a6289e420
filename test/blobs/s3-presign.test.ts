/**
 * S3Presigner builds the request itself and signs it with the SDK's SigV4 signer where Coffer has an endpoint and static
 * credentials: each URL
 * must be exactly the one the AWS SDK's getSignedUrl makes for the same request at the same instant (same path,
 * same parameters, same signature), for every request Coffer presigns and for keys that need encoding. The stores
 * accepting these URLs (and refusing another Content-Length) is tested end to end on s3rver and Ceph in
 * test/api/presigned-upload.test.ts.
 */
import { GetObjectCommand, PutObjectCommand, UploadPartCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { createS3Client } from '../../src/blobs/s3.js';
import { S3Presigner } from '../../src/blobs/s3-presign.js';

const AT = Date.parse('2026-11-28T19:31:03.456Z');
const LIFETIME_S = 900;

function both(endpoint: string, region = 'eu-central-1') {
  const options = {
    bucket: 'coffer-b',
    endpoint,
    region,
    accessKeyId: 'AKIDEXAMPLE',
    secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  };
  const ours = new S3Presigner({ ...options, publicEndpoint: null, lifetimeMs: LIFETIME_S * 1000, now: () => AT });
  const client = createS3Client(options);
  type Signable = PutObjectCommand | UploadPartCommand | GetObjectCommand;
  const sdk = (command: Signable, signed?: string[]) =>
    getSignedUrl(client, command as unknown as PutObjectCommand, {
      expiresIn: LIFETIME_S,
      signingDate: new Date(AT),
      ...(signed ? { signableHeaders: new Set(signed) } : {}),
    });
  return { ours, sdk };
}

/** The same URL: origin, path, and the same parameters with the same values (their order in the query aside). */
function same(actual: string, expected: string) {
  const [a, e] = [new URL(actual), new URL(expected)];
  expect(a.origin + a.pathname).toBe(e.origin + e.pathname);
  expect([...a.searchParams].sort()).toEqual([...e.searchParams].sort());
  expect(a.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
}

const KEYS = ['backups/0a/1b/0193c0de-7f00-7000-8000-000000000001.bin', "odd keys/a b+c!(x)*y~z'q/ünï—código.bin", 'a//b/'];
const ENDPOINTS = ['http://127.0.0.1:7480', 'https://s3.example.test', 'https://objects.example.test:8443/'];

describe('S3Presigner signs as the AWS SDK does', () => {
  for (const endpoint of ENDPOINTS) {
    for (const key of KEYS) {
      it(`PUT, part and GET of ${JSON.stringify(key)} on ${endpoint}`, async () => {
        const { ours, sdk } = both(endpoint);
        const put = await ours.presignPut(key, 1_048_576);
        same(put.url, await sdk(new PutObjectCommand({ Bucket: 'coffer-b', Key: key, ContentLength: 1_048_576 }), ['content-length']));
        expect(put).toMatchObject({ method: 'PUT', headers: { 'content-length': '1048576' } });
        expect(new URL(put.url).searchParams.get('X-Amz-SignedHeaders')).toBe('content-length;host');

        const uploadId = '2~Zx/+ab=cd';
        const part = await ours.presignPart(key, uploadId, 17, 5_242_880);
        const input = { Bucket: 'coffer-b', Key: key, UploadId: uploadId, PartNumber: 17, ContentLength: 5_242_880 };
        same(part.url, await sdk(new UploadPartCommand(input), ['content-length']));

        const get = await ours.presignGet(key);
        same(get.url, await sdk(new GetObjectCommand({ Bucket: 'coffer-b', Key: key })));
        expect(get.headers).toEqual({});
      });
    }
  }

  it('keeps the signing key for its day only (a URL signed the next day is signed with that day)', async () => {
    let now = AT;
    const options = { bucket: 'b', endpoint: 'http://127.0.0.1:7480', region: 'us-east-1', accessKeyId: 'AK', secretAccessKey: 'SK' };
    const ours = new S3Presigner({ ...options, publicEndpoint: null, lifetimeMs: 60_000, now: () => now });
    await ours.presignPut('k', 1);
    now = AT + 24 * 3600_000;
    const next = await ours.presignPut('k', 1);
    const expected = await getSignedUrl(createS3Client(options), new PutObjectCommand({ Bucket: 'b', Key: 'k', ContentLength: 1 }), {
      expiresIn: 60,
      signingDate: new Date(now),
      signableHeaders: new Set(['content-length']),
    });
    same(next.url, expected);
  });
});
