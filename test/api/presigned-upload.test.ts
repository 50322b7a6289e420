/**
 * The s3-presigned upload protocol (docs/upload-protocols.md#s3-presigned), server side: the test plays the client
 * and PUTs the bytes to the presigned URLs itself with fetch. Single PUT and multipart happy paths (then finalize and
 * download give the same bytes), bodies of another length than signed, complete with a missing or wrong-sized object
 * (refused, the object removed, the reservation released), the archive limit and the quota at start and per part,
 * a complete repeated, abort, expired URLs, the upload window, abandoned uploads swept, presigned off, and beside
 * blobhost-client. On PostgreSQL + S3, via s3rver and via Ceph's RADOS Gateway.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const LIMIT = 24 * MiB;
const PART = 5 * MiB;

for (const engine of S3_ENGINES) {
  describe.skipIf(skipPg || skipEngine(engine))(`s3-presigned uploads (postgres + ${engine})`, () => {
    let s3: TestS3;
    let schema: TestSchema;
    let server: TestServer;
    /** Everything the server logs. */
    let log = '';

    beforeAll(async () => {
      requirePg();
      s3 = await startS3(engine);
      schema = await createTestSchema('coffer_presigned');
      const sink = new Writable({
        write(chunk, _encoding, done) {
          log += String(chunk);
          done();
        },
      });
      server = await startTestServer({
        env: {
          ...s3.env,
          COFFER_DATABASE_URL: schema.url,
          COFFER_S3_PRESIGNED: 'on',
          COFFER_MAX_ARCHIVE_BYTES: String(LIMIT),
        },
        logger: { level: 'trace', stream: sink },
      });
    });
    afterAll(async () => {
      await server?.stop();
      await s3?.close();
      await schema?.drop();
    });

    /** A new account (its own quota, if given) with a vault and an open slot. */
    async function slot(quota?: number) {
      const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
      if (quota !== undefined) await server.parts.quotas.setQuota(accountId, quota);
      const call = api(server.url, apiKey);
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
      const created = await call('POST', '/api/backups');
      expect(created.status).toBe(201);
      expect(created.headers.get('coffer-extensions')).toBe('s3-presigned-upload');
      const backupId = created.body.backupId as string;
      const negotiate = (type: string, payload: Record<string, unknown>) =>
        call('POST', '/api/backups/upload', { json: { type: `s3-presigned.${type}`, payload: { backupId, ...payload } } });
      const usage = async () => (await server.parts.quotas.quota(accountId))!.usage;
      return { call, accountId, backupId, blobPath: created.body.blobPath as string, negotiate, usage };
    }

    /** The client's PUT to a presigned request, with exactly its headers (or others, to misbehave). */
    async function put(request: { url: string; headers: Record<string, string> }, body: Buffer, headers = request.headers) {
      return fetch(request.url, { method: 'PUT', headers, body: new Uint8Array(body) });
    }

    async function finalizeAndRead(s: Awaited<ReturnType<typeof slot>>, data: Buffer) {
      const finalized = await s.call('POST', `/api/backups/${s.backupId}/finalize`, { json: finalizeBody(data.length) });
      expect(finalized.status).toBe(200);
      const content = await s.call('GET', `/api/backups/${s.backupId}/content`);
      expect(content.status).toBe(200);
      expect(content.raw.equals(data)).toBe(true);
    }

    it('single: start with the size, PUT to the URL, complete; the slot is UPLOADED, finalize and read back', async () => {
      const s = await slot();
      const data = randomBytes(300_000);
      const start = await s.negotiate('start', { size: data.length });
      expect(start.status).toBe(200);
      expect(start.body).toMatchObject({ type: 's3-presigned.start', mode: 'single', request: { method: 'PUT' } });
      expect(start.body.uploadKey).toMatch(new RegExp(`^${s.blobPath}/[0-9a-f-]{36}\\.bin$`));
      expect(start.body.request.headers).toEqual({ 'content-length': String(data.length) });
      expect(Date.parse(start.body.request.expiresAt)).toBeGreaterThan(Date.now());
      // The declared size is reserved against the quota at once.
      expect(await s.usage()).toBe(data.length);
      const stored = await put(start.body.request, data);
      expect(stored.status).toBe(200);
      const complete = await s.negotiate('complete', { uploadKey: start.body.uploadKey, size: data.length });
      expect(complete.status).toBe(200);
      expect(complete.body).toEqual({ type: 's3-presigned.complete', pathname: s.blobPath, size: data.length });
      expect((await s.call('GET', `/api/backups/${s.backupId}`)).body.status).toBe('UPLOADED');
      // The reservation ended with the record's update: the bytes count once.
      expect(await s.usage()).toBe(data.length);
      // A completion repeated (its answer lost) answers the same.
      const again = await s.negotiate('complete', { uploadKey: start.body.uploadKey, size: data.length });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(complete.body);
      await finalizeAndRead(s, data);
    });

    it('multipart: start without a size, sign and PUT each part, complete; parts signed again replace their size', async () => {
      const s = await slot();
      const data = randomBytes(2 * PART + 123_456);
      const start = await s.negotiate('start', {});
      expect(start.status).toBe(200);
      expect(start.body).toMatchObject({ type: 's3-presigned.start', mode: 'multipart', minPartBytes: PART, maxParts: 10_000 });
      const { uploadKey, uploadId } = start.body;
      expect(await s.usage()).toBe(0);
      // Part 3 is first signed for a wrong size, then again for the right one: only the latest counts.
      const wrong = await s.negotiate('part', { uploadKey, uploadId, partNumber: 3, size: 1000 });
      expect(wrong.status).toBe(200);
      expect(await s.usage()).toBe(1000);
      const parts: { partNumber: number; etag: string }[] = [];
      for (const [index, chunk] of [data.subarray(0, PART), data.subarray(PART, 2 * PART), data.subarray(2 * PART)].entries()) {
        const partNumber = index + 1;
        const signed = await s.negotiate('part', { uploadKey, uploadId, partNumber, size: chunk.length });
        expect(signed.status).toBe(200);
        expect(signed.body).toMatchObject({ type: 's3-presigned.part', partNumber, request: { method: 'PUT' } });
        expect(signed.body.request.headers).toEqual({ 'content-length': String(chunk.length) });
        const stored = await put(signed.body.request, chunk);
        expect(stored.status).toBe(200);
        parts.push({ partNumber, etag: stored.headers.get('etag')! });
      }
      expect(await s.usage()).toBe(data.length);
      const complete = await s.negotiate('complete', { uploadKey, uploadId, parts, size: data.length });
      expect(complete.status).toBe(200);
      expect(complete.body).toEqual({ type: 's3-presigned.complete', pathname: s.blobPath, size: data.length });
      expect(await s.usage()).toBe(data.length);
      expect(await s3.incompleteUploads()).not.toContain(uploadId);
      await finalizeAndRead(s, data);
    });

    it('multipart: complete without a part list assembles the parts the store holds', async () => {
      const s = await slot();
      const data = randomBytes(PART + 10);
      const { uploadKey, uploadId } = (await s.negotiate('start', {})).body;
      for (const [partNumber, chunk] of [
        [1, data.subarray(0, PART)],
        [2, data.subarray(PART)],
      ] as const) {
        const signed = await s.negotiate('part', { uploadKey, uploadId, partNumber, size: chunk.length });
        expect((await put(signed.body.request, chunk)).status).toBe(200);
      }
      const complete = await s.negotiate('complete', { uploadKey, uploadId, size: data.length });
      expect(complete.status).toBe(200);
      await finalizeAndRead(s, data);
    });

    it('a body of another length than signed is refused by the store, or by complete (removed, reservation released)', async () => {
      const s = await slot();
      const start = await s.negotiate('start', { size: 1000 });
      for (const body of [randomBytes(999), randomBytes(1001)]) {
        const response = await put(start.body.request, body, {});
        if (engine === 'ceph') expect(response.status).toBe(403);
      }
      // s3rver does not check presigned signatures: whatever it stored is refused at complete.
      const complete = await s.negotiate('complete', { uploadKey: start.body.uploadKey, size: 1000 });
      expect(complete.status).toBe(409);
      expect(complete.body.code).toBe('ciphertext_size_mismatch');
      expect(await s3.has(start.body.uploadKey)).toBe(false);
      expect(await s.usage()).toBe(0);
      expect((await s.call('GET', `/api/backups/${s.backupId}`)).body.status).toBe('PENDING_UPLOAD');
    });

    it('complete refuses a missing object and a size other than signed; what was left is removed', async () => {
      const s = await slot();
      const missing = await s.negotiate('start', { size: 500 });
      const refused = await s.negotiate('complete', { uploadKey: missing.body.uploadKey, size: 500 });
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('ciphertext_size_mismatch');
      expect(await s.usage()).toBe(0);

      const data = randomBytes(700);
      const start = await s.negotiate('start', { size: data.length });
      expect((await put(start.body.request, data)).status).toBe(200);
      const lied = await s.negotiate('complete', { uploadKey: start.body.uploadKey, size: 600 });
      expect(lied.status).toBe(409);
      expect(await s3.has(start.body.uploadKey)).toBe(false);
      expect(await s.usage()).toBe(0);
      // The attempt is gone: completing it again names no open upload.
      const gone = await s.negotiate('complete', { uploadKey: start.body.uploadKey, size: data.length });
      expect(gone.status).toBe(400);
      expect(gone.body.details.issues[0].path).toBe('payload.uploadKey');
      expect((await s.call('GET', `/api/backups/${s.backupId}`)).body.status).toBe('PENDING_UPLOAD');
    });

    it('the archive limit and the quota hold at start and for each part', async () => {
      const s = await slot(10 * MiB);
      const over = await s.negotiate('start', { size: LIMIT + 1 });
      expect(over.status).toBe(413);
      expect(over.body.code).toBe('payload_too_large');
      const quota = await s.negotiate('start', { size: 10 * MiB + 1 });
      expect(quota.status).toBe(413);
      expect(quota.body.code).toBe('upload_exceeds_quota');
      expect(await s.usage()).toBe(0);

      const { uploadKey, uploadId } = (await s.negotiate('start', {})).body;
      expect((await s.negotiate('part', { uploadKey, uploadId, partNumber: 1, size: 6 * MiB })).status).toBe(200);
      const past = await s.negotiate('part', { uploadKey, uploadId, partNumber: 2, size: 5 * MiB });
      expect(past.status).toBe(413);
      expect(past.body.code).toBe('upload_exceeds_quota');
      expect(await s.usage()).toBe(6 * MiB);
      // Part 1 signed again smaller makes room for part 2.
      expect((await s.negotiate('part', { uploadKey, uploadId, partNumber: 1, size: 5 * MiB })).status).toBe(200);
      expect((await s.negotiate('part', { uploadKey, uploadId, partNumber: 2, size: 5 * MiB })).status).toBe(200);
      expect(await s.usage()).toBe(10 * MiB);

      // The archive limit, for the upload's parts together.
      const t = await slot();
      const big = (await t.negotiate('start', {})).body;
      for (const partNumber of [1, 2, 3, 4]) {
        const size = partNumber < 4 ? 6 * MiB : 6 * MiB + 1;
        const response = await t.negotiate('part', { uploadKey: big.uploadKey, uploadId: big.uploadId, partNumber, size });
        expect(response.status).toBe(partNumber < 4 ? 200 : 413);
        if (partNumber === 4) expect(response.body.code).toBe('payload_too_large');
      }
      expect(await t.usage()).toBe(18 * MiB);
      // Abort ends the reservations and the multipart upload.
      const aborted = await t.negotiate('abort', { uploadKey: big.uploadKey, uploadId: big.uploadId });
      expect(aborted.status).toBe(200);
      expect(await t.usage()).toBe(0);
      expect(await s3.incompleteUploads()).not.toContain(big.uploadId);
    });

    it("another account's slot, a foreign key, a finished slot: refused", async () => {
      const s = await slot();
      const other = await slot();
      const foreign = await other.call('POST', '/api/backups/upload', {
        json: { type: 's3-presigned.start', payload: { backupId: s.backupId, size: 10 } },
      });
      expect(foreign.status).toBe(400);
      expect(foreign.body.details.issues[0].path).toBe('payload.backupId');
      const start = await other.negotiate('start', { size: 10 });
      const wrongKey = await s.negotiate('complete', { uploadKey: start.body.uploadKey, size: 10 });
      expect(wrongKey.status).toBe(400);
      expect(wrongKey.body.details.issues[0].path).toBe('payload.uploadKey');
      const unknown = await s.call('POST', '/api/backups/upload', { json: { type: 's3-presigned.nope', payload: {} } });
      expect(unknown.status).toBe(400);
      expect(unknown.body.details.issues[0].path).toBe('type');

      const data = randomBytes(10);
      expect((await put(start.body.request, data)).status).toBe(200);
      expect((await other.negotiate('complete', { uploadKey: start.body.uploadKey, size: 10 })).status).toBe(200);
      const late = await other.negotiate('start', { size: 10 });
      expect(late.status).toBe(409);
      expect(late.body.code).toBe('invalid_backup_state');
    });

    it('signed URLs never reach the log', async () => {
      const s = await slot();
      const start = await s.negotiate('start', { size: 10 });
      const signature = new URL(start.body.request.url).searchParams.get('X-Amz-Signature');
      expect(signature).toBeTruthy();
      expect(log).toContain('/api/backups/upload');
      expect(log).not.toContain(signature!);
      expect(log).not.toContain('X-Amz-');
    });
  });
}

for (const engine of S3_ENGINES) {
  describe.skipIf(skipPg || skipEngine(engine))(`s3-presigned: expiry, the upload window, the sweeper (postgres + ${engine})`, () => {
    const clock = new ManualClock(Date.now());
    const WINDOW = 3_600_000;
    let s3: TestS3;
    let schema: TestSchema;
    let server: TestServer;

    beforeAll(async () => {
      requirePg();
      s3 = await startS3(engine);
      schema = await createTestSchema('coffer_presigned_expiry');
      server = await startTestServer({
        clock,
        env: { ...s3.env, COFFER_DATABASE_URL: schema.url, COFFER_S3_PRESIGNED: 'on', COFFER_S3_URL_LIFETIME: '3s' },
      });
    });
    afterAll(async () => {
      await server?.stop();
      await s3?.close();
      await schema?.drop();
    });

    async function slot() {
      const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
      const call = api(server.url, apiKey);
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
      const created = await call('POST', '/api/backups');
      expect(created.status).toBe(201);
      const backupId = created.body.backupId as string;
      const negotiate = (type: string, payload: Record<string, unknown>) =>
        call('POST', '/api/backups/upload', { json: { type: `s3-presigned.${type}`, payload: { backupId, ...payload } } });
      const usage = async () => (await server.parts.quotas.quota(accountId))!.usage;
      return { call, backupId, blobPath: created.body.blobPath as string, negotiate, usage };
    }
    const put = (request: { url: string; headers: Record<string, string> }, body: Buffer) =>
      fetch(request.url, { method: 'PUT', headers: request.headers, body: new Uint8Array(body) });

    it('an expired URL is refused by the store; the part signed again (or a new start) works, counted once', async () => {
      const s = await slot();
      const data = randomBytes(PART + 100);
      const { uploadKey, uploadId } = (await s.negotiate('start', {})).body;
      const first = await s.negotiate('part', { uploadKey, uploadId, partNumber: 1, size: PART });
      const single = await s.negotiate('start', { size: 100 });
      // Real time: the store judges the URL by its own clock (a URL is dated to the second: it lives 2 to 3 s).
      await sleep(4000);
      expect((await put(first.body.request, data.subarray(0, PART))).status).toBe(403);
      expect((await put(single.body.request, data.subarray(0, 100))).status).toBe(403);
      expect((await s.negotiate('abort', { uploadKey: single.body.uploadKey })).status).toBe(200);
      const parts = [];
      for (const [partNumber, chunk] of [
        [1, data.subarray(0, PART)],
        [2, data.subarray(PART)],
      ] as const) {
        const signed = await s.negotiate('part', { uploadKey, uploadId, partNumber, size: chunk.length });
        const stored = await put(signed.body.request, chunk);
        expect(stored.status).toBe(200);
        parts.push({ partNumber, etag: stored.headers.get('etag')! });
      }
      expect(await s.usage()).toBe(data.length);
      const complete = await s.negotiate('complete', { uploadKey, uploadId, parts, size: data.length });
      expect(complete.status).toBe(200);
      expect(await s.usage()).toBe(data.length);
    });

    it('an abandoned upload (object never completed, multipart never completed) is swept as an orphan', async () => {
      const s = await slot();
      const data = randomBytes(1000);
      const start = await s.negotiate('start', { size: data.length });
      expect((await put(start.body.request, data)).status).toBe(200);
      const multi = (await s.negotiate('start', {})).body;
      const part = await s.negotiate('part', { uploadKey: multi.uploadKey, uploadId: multi.uploadId, partNumber: 1, size: 10 });
      expect((await put(part.body.request, randomBytes(10))).status).toBe(200);
      expect(await s3.has(start.body.uploadKey)).toBe(true);
      expect(await s3.incompleteUploads()).toContain(multi.uploadId);
      // Within the grace nothing goes; past it (grace 0 here), both do.
      await server.parts.sweeper.removeOrphans();
      expect(await s3.has(start.body.uploadKey)).toBe(true);
      const swept = await server.parts.sweeper.removeOrphans(0);
      expect(swept.orphans).toBeGreaterThanOrEqual(1);
      expect(await s3.has(start.body.uploadKey)).toBe(false);
      expect(await s3.incompleteUploads()).not.toContain(multi.uploadId);
      // The slot can still be uploaded to, from a new start.
      const again = await s.negotiate('start', { size: data.length });
      expect((await put(again.body.request, data)).status).toBe(200);
      expect((await s.negotiate('complete', { uploadKey: again.body.uploadKey, size: data.length })).status).toBe(200);
    });

    it('past the upload window the slot takes no start, part or complete; its reservation stops counting', async () => {
      const s = await slot();
      const data = randomBytes(1000);
      const start = await s.negotiate('start', { size: data.length });
      expect((await put(start.body.request, data)).status).toBe(200);
      const multi = (await s.negotiate('start', {})).body;
      expect(await s.usage()).toBe(1000);
      // (The last test of this server: its clock stays an hour ahead.)
      clock.advance(WINDOW + 1000);
      expect(await s.usage()).toBe(0);
      const late = await s.negotiate('start', { size: 10 });
      expect(late.status).toBe(400);
      expect(late.body.details.issues[0].path).toBe('payload.backupId');
      const part = await s.negotiate('part', { uploadKey: multi.uploadKey, uploadId: multi.uploadId, partNumber: 1, size: 10 });
      expect(part.status).toBe(400);
      const complete = await s.negotiate('complete', { uploadKey: start.body.uploadKey, size: data.length });
      expect(complete.status).toBe(400);
      expect(await s.usage()).toBe(0);
    });
  });
}

for (const engine of S3_ENGINES) {
  describe.skipIf(skipPg || skipEngine(engine))(`s3-presigned with COFFER_S3_PUBLIC_ENDPOINT (postgres + ${engine})`, () => {
    let s3: TestS3;
    let schema: TestSchema;
    let server: TestServer;
    let publicEndpoint: string;

    beforeAll(async () => {
      requirePg();
      s3 = await startS3(engine);
      schema = await createTestSchema('coffer_presigned_public');
      // Another name of the same store: the address clients use, not the server's own.
      publicEndpoint = s3.endpoint.replace('127.0.0.1', 'localhost');
      expect(publicEndpoint).not.toBe(s3.endpoint);
      server = await startTestServer({
        env: { ...s3.env, COFFER_DATABASE_URL: schema.url, COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: publicEndpoint },
      });
    });
    afterAll(async () => {
      await server?.stop();
      await s3?.close();
      await schema?.drop();
    });

    it('URLs name the public endpoint; the upload through it completes', async () => {
      const { apiKey } = await server.newKey({ plan: 'pro' });
      const call = api(server.url, apiKey);
      expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
      const { backupId } = (await call('POST', '/api/backups')).body;
      const data = randomBytes(5000);
      const negotiate = (type: string, payload: Record<string, unknown>) =>
        call('POST', '/api/backups/upload', { json: { type: `s3-presigned.${type}`, payload: { backupId, ...payload } } });
      const start = await negotiate('start', { size: data.length });
      expect(new URL(start.body.request.url).origin).toBe(new URL(publicEndpoint).origin);
      const stored = await fetch(start.body.request.url, {
        method: 'PUT',
        headers: start.body.request.headers,
        body: new Uint8Array(data),
      });
      expect(stored.status).toBe(200);
      const complete = await negotiate('complete', { uploadKey: start.body.uploadKey, size: data.length });
      expect(complete.status).toBe(200);
      expect(complete.body.size).toBe(data.length);
    });
  });
}

describe.skipIf(skipPg)('s3-presigned where it is not offered', () => {
  let s3: TestS3;
  let schema: TestSchema;
  let server: TestServer;

  beforeAll(async () => {
    requirePg();
    s3 = await startS3('s3rver');
    schema = await createTestSchema('coffer_presigned_off');
    server = await startTestServer({ env: { ...s3.env, COFFER_DATABASE_URL: schema.url } });
  });
  afterAll(async () => {
    await server?.stop();
    await s3?.close();
    await schema?.drop();
  });

  it('POST /api/backups announces nothing; a negotiation is refused with 400 on type; other JSON stays 415', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const call = api(server.url, apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const created = await call('POST', '/api/backups');
    expect(created.headers.get('coffer-extensions')).toBeNull();
    const start = await call('POST', '/api/backups/upload', {
      json: { type: 's3-presigned.start', payload: { backupId: created.body.backupId, size: 10 } },
    });
    expect(start.status).toBe(400);
    expect(start.body.details.issues[0].path).toBe('type');
    const other = await call('POST', '/api/backups/upload', { json: { type: 'blob.generate-client-token' } });
    expect(other.status).toBe(415);
  });
});

describe.skipIf(skipPg)('s3-presigned beside blobhost-client', () => {
  let s3: TestS3;
  let schema: TestSchema;
  let server: TestServer;

  beforeAll(async () => {
    requirePg();
    s3 = await startS3('s3rver');
    schema = await createTestSchema('coffer_presigned_blobhost');
    server = await startTestServer({
      env: { ...s3.env, COFFER_DATABASE_URL: schema.url, COFFER_S3_PRESIGNED: 'on', COFFER_UPLOAD_PROTOCOL: 'blobhost-client' },
    });
  });
  afterAll(async () => {
    await server?.stop();
    await s3?.close();
    await schema?.drop();
  });

  it('the negotiation works in blobhost-client mode too, and the handshake still does', async () => {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const call = api(server.url, apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const created = await call('POST', '/api/backups');
    expect(created.body.upload.protocol).toBe('blobhost-client');
    expect(created.headers.get('coffer-extensions')).toBe('s3-presigned-upload');
    const { backupId, blobPath } = created.body;
    const data = randomBytes(2000);
    const start = await call('POST', '/api/backups/upload', {
      json: { type: 's3-presigned.start', payload: { backupId, size: data.length } },
    });
    expect(start.status).toBe(200);
    expect(start.body.mode).toBe('single');
    const token = await call('POST', '/api/backups/upload', {
      json: { type: 'blob.generate-client-token', payload: { pathname: blobPath, clientPayload: null, multipart: false } },
    });
    expect(token.status).toBe(200);
    expect(token.body.type).toBe('blob.generate-client-token');
    const stored = await fetch(start.body.request.url, { method: 'PUT', headers: start.body.request.headers, body: new Uint8Array(data) });
    expect(stored.status).toBe(200);
    const complete = await call('POST', '/api/backups/upload', {
      json: { type: 's3-presigned.complete', payload: { backupId, uploadKey: start.body.uploadKey, size: data.length } },
    });
    expect(complete.status).toBe(200);
    expect(complete.body).toEqual({ type: 's3-presigned.complete', pathname: blobPath, size: data.length });
    // Without a key, a negotiation is refused before its body is looked at.
    const anonymous = await api(server.url)('POST', '/api/backups/upload', { json: { type: 's3-presigned.start', payload: { backupId } } });
    expect(anonymous.status).toBe(401);
  });
});
