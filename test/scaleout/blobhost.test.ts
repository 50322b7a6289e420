/**
 * The blobhost-client upload protocol, driven by the stock `@vercel/blob` package (unmodified, in Node)
 * with VERCEL_BLOB_API_URL pointing at Coffer: single and multipart uploads of a 20 MiB ciphertext, then
 * finalize and download return the same bytes; tampered and expired tokens, a wrong pathname and oversize
 * bodies are refused (with non-retried blob API errors), leaving the slot PENDING_UPLOAD and no blob behind.
 * Runs on the embedded pair (SQLite + files) and the scale-out pair (PostgreSQL + S3 via s3rver, and via Ceph's
 * RADOS Gateway).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { put, upload } from '@vercel/blob/client';
import type { MultipartBlobStore } from '../../src/blobs/blob-store.js';
import { RW_TOKEN_SETTING } from '../../src/services/blob-host.js';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { type S3Engine, S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const LIMIT = 25 * MiB;

interface Backend {
  name: string;
  skip: boolean;
  env(): Promise<Record<string, string>>;
  /** Blob keys stored under a prefix, complete or not (incomplete multipart uploads included). */
  leftovers(server: TestServer, prefix: string): Promise<string[]>;
  /** Incomplete multipart uploads the S3 store holds. */
  incomplete(): Promise<string[]>;
  tearDown(): Promise<void>;
}

async function listed(server: TestServer, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of server.parts.blobs.list(prefix)) keys.push(entry.key);
  return keys;
}

const embedded: Backend = {
  name: 'sqlite+fs',
  skip: false,
  env: async () => ({}),
  async leftovers(server, prefix) {
    return listed(server, prefix);
  },
  incomplete: async () => [],
  async tearDown() {},
};

const scaleOut = (engine: S3Engine): Backend => {
  let s3: TestS3 | undefined;
  let schema: TestSchema | undefined;
  return {
    name: engine === 's3rver' ? 'postgres+s3' : `postgres+s3 (${engine})`,
    skip: skipPg || skipEngine(engine),
    async env() {
      requirePg();
      s3 = await startS3(engine);
      schema = await createTestSchema('coffer_blobhost');
      return { ...s3.env, COFFER_DATABASE_URL: schema.url };
    },
    async leftovers(server, prefix) {
      return [...(await listed(server, prefix)), ...(await s3!.incompleteUploads())];
    },
    incomplete: () => s3!.incompleteUploads(),
    async tearDown() {
      await s3?.close();
      await schema?.drop();
    },
  };
};

describe.each([embedded, ...S3_ENGINES.map(scaleOut)])('blobhost-client with the stock @vercel/blob client: $name', (backend) => {
  const clock = new ManualClock(Date.now());
  let server: TestServer;

  beforeAll(async () => {
    if (backend.skip) return;
    const env = await backend.env();
    server = await startTestServer({
      clock,
      env: { ...env, COFFER_UPLOAD_PROTOCOL: 'blobhost-client', COFFER_MAX_ARCHIVE_BYTES: String(LIMIT) },
    });
    // All the stock client needs: where the blob API is.
    process.env.VERCEL_BLOB_API_URL = `${server.url}/blob`;
  });
  afterAll(async () => {
    if (backend.skip) return;
    await server?.stop();
    await backend.tearDown();
  });

  /** A new account with a vault and an open slot. */
  async function slot() {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const call = api(server.url, apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const created = await call('POST', '/api/backups');
    expect(created.status).toBe(201);
    const { backupId, blobPath, upload: instructions } = created.body;
    return {
      apiKey,
      call,
      backupId: backupId as string,
      blobPath: blobPath as string,
      handleUploadUrl: instructions.handleUploadUrl as string,
      instructions,
    };
  }

  async function clientToken(s: Awaited<ReturnType<typeof slot>>, pathname = s.blobPath, multipart = false) {
    const response = await s.call('POST', '/api/backups/upload', {
      json: { type: 'blob.generate-client-token', payload: { pathname, clientPayload: null, multipart } },
    });
    return response;
  }

  async function expectUntouched(s: Awaited<ReturnType<typeof slot>>) {
    const record = await s.call('GET', `/api/backups/${s.backupId}`);
    expect(record.body.status).toBe('PENDING_UPLOAD');
    expect(await backend.leftovers(server, `${s.blobPath}/`)).toEqual([]);
  }

  async function finalizeAndDownload(s: Awaited<ReturnType<typeof slot>>, data: Buffer) {
    const record = await s.call('GET', `/api/backups/${s.backupId}`);
    expect(record.body).toMatchObject({ status: 'UPLOADED', ciphertextSizeBytes: data.length });
    const ready = await s.call('POST', `/api/backups/${s.backupId}/finalize`, { json: finalizeBody(data.length) });
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('READY');
    const content = await fetch(`${server.url}/api/backups/${s.backupId}/content`, {
      headers: { authorization: `Bearer ${s.apiKey}` },
    });
    expect(content.status).toBe(200);
    expect(Buffer.from(await content.arrayBuffer()).equals(data)).toBe(true);
  }

  it.skipIf(backend.skip)('the create response announces the handshake address', async () => {
    const s = await slot();
    expect(s.instructions).toEqual({
      method: 'POST',
      protocol: 'blobhost-client',
      handleUploadUrl: `${server.url}/api/backups/upload`,
      contentType: 'application/octet-stream',
    });
  });

  it.skipIf(backend.skip)('single upload of 20 MiB, then finalize and download give the same bytes', async () => {
    const s = await slot();
    const data = randomBytes(20 * MiB);
    const result = await upload(s.blobPath, data, {
      access: 'private',
      handleUploadUrl: s.handleUploadUrl,
      headers: { authorization: `Bearer ${s.apiKey}` },
      contentType: 'application/octet-stream',
    });
    expect(result).toMatchObject({
      pathname: s.blobPath,
      contentType: 'application/octet-stream',
      contentDisposition: `attachment; filename="backup-${s.backupId}.bin"`,
      url: `${server.url}/api/backups/${s.backupId}/content`,
    });
    await finalizeAndDownload(s, data);
  });

  it.skipIf(backend.skip)('multipart upload of 20 MiB (8 MiB parts, unsorted completion), then the same bytes back', async () => {
    const s = await slot();
    const data = randomBytes(20 * MiB + 4321);
    const result = await upload(s.blobPath, data, {
      access: 'private',
      multipart: true,
      handleUploadUrl: s.handleUploadUrl,
      headers: { 'x-api-key': s.apiKey },
    });
    expect(result.pathname).toBe(s.blobPath);
    await finalizeAndDownload(s, data);
    expect(await backend.incomplete()).toEqual([]);
  });

  it.skipIf(backend.skip)('the handshake needs the API key and the caller’s own pending slot', async () => {
    const s = await slot();
    const other = await slot();
    const anonymous = await api(server.url)('POST', '/api/backups/upload', {
      json: { type: 'blob.generate-client-token', payload: { pathname: s.blobPath } },
    });
    expect(anonymous.status).toBe(401);
    const foreign = await clientToken(s, other.blobPath);
    expect(foreign.status).toBe(400);
    expect(foreign.body.details.issues[0].path).toBe('payload.pathname');
    const bogus = await s.call('POST', '/api/backups/upload', { json: { type: 'blob.generate-presigned-url', payload: {} } });
    expect(bogus.status).toBe(400);
    const broken = await s.call('POST', '/api/backups/upload', { body: '{"type":', headers: { 'content-type': 'application/json' } });
    expect(broken.status).toBe(400);
    expect(broken.body.code).toBe('invalid_json');
    const good = await clientToken(s);
    expect(good.status).toBe(200);
    expect(good.body.type).toBe('blob.generate-client-token');
    expect(good.body.clientToken).toMatch(/^vercel_blob_client_[0-9a-f]+_[A-Za-z0-9+/=]+$/);

    // The stock client with somebody else's pathname never gets a token.
    await expect(
      upload(other.blobPath, Buffer.from('x'), {
        access: 'private',
        handleUploadUrl: s.handleUploadUrl,
        headers: { authorization: `Bearer ${s.apiKey}` },
      }),
    ).rejects.toThrow(/retrieve the client token/);
    await expectUntouched(other);
  });

  it.skipIf(backend.skip)(
    'malformed handshake, callback and part-list bodies are refused with the issue of their first bad field',
    async () => {
      const rwToken = await server.parts.stores.settings.ensureSetting(RW_TOKEN_SETTING, 'unused', 0);
      const s = await slot();
      const issueOf = async (json: unknown, signed = false) => {
        const body = JSON.stringify(json);
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (signed) headers['x-vercel-signature'] = createHmac('sha256', rwToken).update(body).digest('hex');
        const response = await s.call('POST', '/api/backups/upload', { body, headers });
        expect(response.status, body).toBe(400);
        expect(response.body.code, body).toBe('validation_failed');
        return response.body.details.issues;
      };
      const handshake = (payload: unknown) => ({ type: 'blob.generate-client-token', payload });
      const cases: [unknown, string, string, boolean?][] = [
        [[1], '(body)', 'must be a JSON object'],
        [null, '(body)', 'must be a JSON object'],
        [{ type: 'blob.generate-client-token' }, 'payload', 'must be an object'],
        [handshake([]), 'payload', 'must be an object'],
        [handshake({ clientPayload: 5 }), 'payload.pathname', 'must be a string'],
        [handshake({ pathname: 7, multipart: 'yes' }), 'payload.pathname', 'must be a string'],
        [handshake({ pathname: s.blobPath, clientPayload: 5, multipart: 'yes' }), 'payload.clientPayload', 'must be a string or null'],
        [handshake({ pathname: s.blobPath, clientPayload: 'x', multipart: 'yes' }), 'payload.multipart', 'must be a boolean'],
        [{ type: 'blob.generate-client-token', payload: {} }, 'payload.pathname', 'must be a string'],
        [{ type: 'other' }, 'type', 'a signed request must be blob.upload-completed', true],
        [{ type: 'blob.upload-completed' }, 'payload.blob.pathname', 'must be a string', true],
        [{ type: 'blob.upload-completed', payload: { blob: [] } }, 'payload.blob.pathname', 'must be a string', true],
        [{ type: 'blob.upload-completed', payload: { blob: { pathname: 1 } } }, 'payload.blob.pathname', 'must be a string', true],
      ];
      for (const [json, path, message, signed] of cases) {
        expect(await issueOf(json, signed)).toEqual([{ path, message }]);
      }

      const { clientToken: token } = (await clientToken(s, s.blobPath, true)).body as { clientToken: string };
      const mpu = (action: string, body?: string, ids: Record<string, string> = {}) =>
        api(server.url)('POST', `/blob/mpu?pathname=${encodeURIComponent(s.blobPath)}`, {
          body,
          headers: { authorization: `Bearer ${token}`, 'x-mpu-action': action, 'x-content-type': 'application/octet-stream', ...ids },
        });
      const created = await mpu('create');
      expect(created.status).toBe(200);
      const ids = { 'x-mpu-key': encodeURIComponent(created.body.key), 'x-mpu-upload-id': created.body.uploadId };
      try {
        const badLists = [
          '{"partNumber":1,"etag":"x"}',
          '[]',
          '[null]',
          '[[1]]',
          '[{"partNumber":1.5,"etag":"x"}]',
          '[{"partNumber":1,"etag":2}]',
          '[{"etag":"x"}]',
          '[1',
        ];
        for (const list of badLists) {
          const refused = await mpu('complete', list, ids);
          expect({ list, status: refused.status, body: refused.body }).toEqual({
            list,
            status: 400,
            body: { error: { code: 'bad_request', message: 'The body must be a JSON array of {partNumber, etag}.' } },
          });
        }
        const tooMany = JSON.stringify(Array.from({ length: 10_001 }, (_, i) => ({ partNumber: i + 1, etag: 'x' })));
        expect((await mpu('complete', tooMany, ids)).body.error.message).toBe('The body must be a JSON array of {partNumber, etag}.');
      } finally {
        await (server.parts.blobs as MultipartBlobStore).abortMultipart(created.body.key, created.body.uploadId);
      }
      await expectUntouched(s);
    },
  );

  it.skipIf(backend.skip)('a tampered token is refused (forbidden), the slot stays untouched', async () => {
    const s = await slot();
    const { clientToken: token } = (await clientToken(s)).body as { clientToken: string };
    const prefix = token.slice(0, token.lastIndexOf('_') + 1);
    const inner = Buffer.from(token.slice(prefix.length), 'base64').toString();
    const [signature, payload] = inner.split('.') as [string, string];
    const flipped = `${signature[0] === 'a' ? 'b' : 'a'}${signature.slice(1)}`;
    const forged = JSON.parse(Buffer.from(payload, 'base64').toString());
    forged.maximumSizeInBytes = 10 * LIMIT;
    const variants = [
      prefix + Buffer.from(`${flipped}.${payload}`).toString('base64'),
      prefix + Buffer.from(`${signature}.${Buffer.from(JSON.stringify(forged)).toString('base64')}`).toString('base64'),
      `vercel_blob_client_otherstore_${token.slice(prefix.length)}`,
    ];
    for (const tampered of variants) {
      await expect(put(s.blobPath, Buffer.from('ciphertext'), { access: 'private', token: tampered })).rejects.toThrow(/Access denied/);
    }
    // Never treated as an API key either.
    expect((await api(server.url, token)('GET', '/api/backups')).status).toBe(401);
    await expectUntouched(s);
  });

  it.skipIf(backend.skip)('an expired token is refused', async () => {
    const s = await slot();
    const { clientToken: token } = (await clientToken(s)).body as { clientToken: string };
    clock.advance(61 * 60_000);
    try {
      await expect(put(s.blobPath, Buffer.from('ciphertext'), { access: 'private', token })).rejects.toThrow(/Client token has expired/);
    } finally {
      clock.advance(-61 * 60_000);
    }
    await expectUntouched(s);
  });

  it.skipIf(backend.skip)('a token used for another pathname is refused', async () => {
    const s = await slot();
    const other = await slot();
    const { clientToken: token } = (await clientToken(s)).body as { clientToken: string };
    await expect(put(other.blobPath, Buffer.from('ciphertext'), { access: 'private', token })).rejects.toThrow(/Pathname mismatch/);
    await expect(put(other.blobPath, Buffer.from('ciphertext'), { access: 'private', token, multipart: true })).rejects.toThrow(
      /Pathname mismatch/,
    );
    await expectUntouched(s);
    await expectUntouched(other);
  });

  it.skipIf(backend.skip)('a content type other than application/octet-stream is refused', async () => {
    const s = await slot();
    const { clientToken: token } = (await clientToken(s)).body as { clientToken: string };
    await expect(put(s.blobPath, Buffer.from('x'), { access: 'private', token, contentType: 'text/plain' })).rejects.toThrow(
      /Content type mismatch/,
    );
    await expectUntouched(s);
  });

  it.skipIf(backend.skip)('oversize bodies are refused, single and multipart, and leave nothing behind', async () => {
    const s = await slot();
    const options = { access: 'private' as const, handleUploadUrl: s.handleUploadUrl, headers: { authorization: `Bearer ${s.apiKey}` } };
    await expect(upload(s.blobPath, randomBytes(LIMIT + 1), options)).rejects.toThrow(/File is too large/);
    await expectUntouched(s);
    // Every 8 MiB part is within the limit; their sum is not: refused as the parts arrive, the upload aborted.
    await expect(upload(s.blobPath, randomBytes(LIMIT + 3 * MiB), { ...options, multipart: true })).rejects.toThrow(/File is too large/);
    await expectUntouched(s);
  });

  it.skipIf(backend.skip)('a signed blob.upload-completed callback is accepted (no API key), a bad signature is not', async () => {
    const rwToken = await server.parts.stores.settings.ensureSetting(RW_TOKEN_SETTING, 'unused', 0);
    const s = await slot();
    const data = randomBytes(1000);
    // An external blob host sharing the BlobStore stored the bytes at the pathname, then calls back.
    await server.parts.blobs.put(s.blobPath, (await import('node:stream')).Readable.from([data]));
    const body = JSON.stringify({
      type: 'blob.upload-completed',
      payload: {
        blob: { pathname: s.blobPath, url: 'https://blob.example/x', contentType: 'application/octet-stream' },
        tokenPayload: null,
      },
    });
    const send = (signature: string) =>
      api(server.url)('POST', '/api/backups/upload', {
        body,
        headers: { 'content-type': 'application/json', 'x-vercel-signature': signature },
      });
    const bad = await send(createHmac('sha256', 'wrong').update(body).digest('hex'));
    expect(bad.status).toBe(401);
    expect(bad.body.code).toBe('authentication_required');
    const good = await send(createHmac('sha256', rwToken).update(body).digest('hex'));
    expect(good.status).toBe(200);
    expect(good.body).toEqual({ type: 'blob.upload-completed', response: 'ok' });
    await finalizeAndDownload(s, data);
    // Idempotent once the slot moved on.
    expect((await send(createHmac('sha256', rwToken).update(body).digest('hex'))).status).toBe(200);
  });

  it.skipIf(backend.skip)('direct uploads keep working in blobhost-client mode', async () => {
    const s = await slot();
    const data = randomBytes(3 * MiB);
    const response = await s.call('POST', `/api/backups/upload?backupId=${s.backupId}`, {
      body: data,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(response.status).toBe(201);
    await finalizeAndDownload(s, data);
  });
});
