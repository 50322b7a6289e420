/**
 * Abuse limits of the blobhost-client blob host, through real HTTP on a loopback port:
 * - multipart uploads: the archive limit holds for the bytes a slot's open uploads store while parts arrive,
 *   a part sent again replaces the earlier copy on disk at once, and a slot has a bounded number of open
 *   uploads (files, counting what is on disk, and S3 via s3rver and Ceph's RADOS Gateway, counting what ListParts
 *   shows);
 * - `/blob` bodies that trickle in are cut off like direct uploads, and a client hang-up is logged at info;
 * - `x-vercel-signature` does not let a request that is not a signed JSON callback past the API key check.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MultipartBlobStore } from '../../src/blobs/blob-store.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { api, envelope } from '../helpers/api.js';
import { type S3Engine, S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const KiB = 1024;
const LIMIT = 1024 * KiB;
const UPLOADS_PER_SLOT = 2;

/** Parts on disk of the incomplete multipart uploads under `prefix` (upload dirs hold a `key` file, in the fs store and s3rver). */
function partsOnDisk(uploadsDir: string, prefix: string): Map<string, number[]> {
  const uploads = new Map<string, number[]>();
  if (!fs.existsSync(uploadsDir)) return uploads;
  for (const id of fs.readdirSync(uploadsDir)) {
    const dir = path.join(uploadsDir, id);
    if (!fs.readFileSync(path.join(dir, 'key'), 'utf8').startsWith(prefix)) continue;
    // fs store: `<part>.<md5>`; s3rver: `<part>` (plus `<part>.md5`).
    const parts = fs.readdirSync(dir).filter((name) => /^\d+(\.[0-9a-f]{32})?$/.test(name));
    uploads.set(
      id,
      parts.map((name) => fs.statSync(path.join(dir, name)).size),
    );
  }
  return uploads;
}

interface Backend {
  name: string;
  skip?: boolean;
  env(): Promise<Record<string, string>>;
  /** The parts' sizes of each incomplete multipart upload under `prefix`. */
  parts(server: TestServer, prefix: string): Promise<Map<string, number[]>>;
  tearDown(): Promise<void>;
}

function s3Backend(engine: S3Engine): Backend {
  let s3: TestS3 | undefined;
  return {
    name: engine === 's3rver' ? 's3' : `s3 (${engine})`,
    skip: skipEngine(engine),
    async env() {
      s3 = await startS3(engine);
      return s3.env;
    },
    async parts(_server, prefix) {
      const store = s3!.store();
      const uploads = new Map<string, number[]>();
      for await (const upload of store.listMultipart(prefix)) {
        uploads.set(
          upload.uploadId,
          (await store.listParts(upload.key, upload.uploadId)).map((part) => part.size),
        );
      }
      return uploads;
    },
    tearDown: async () => s3?.close(),
  };
}

/** s3rver without ListMultipartUploads and ListParts: the blob host must not need them (its counts are in the database). */
function s3WithoutListCalls(): Backend {
  let s3: TestS3 | undefined;
  return {
    name: 's3 (s3rver without ListMultipartUploads and ListParts)',
    async env() {
      s3 = await startS3('s3rver', undefined, { listCalls: false });
      return s3.env;
    },
    parts: async (_server, prefix) => partsOnDisk(path.join(s3!.directory!, s3!.bucket, '._S3rver_uploads'), prefix),
    tearDown: async () => s3?.close(),
  };
}

const backends: Backend[] = [
  {
    name: 'fs',
    env: async () => ({}),
    parts: async (server, prefix) => partsOnDisk(path.join(server.dataDir, 'uploads'), prefix),
    tearDown: async () => {},
  },
  ...S3_ENGINES.map(s3Backend),
  s3WithoutListCalls(),
];

/** A new account with a vault, an open slot and a client token for it. */
async function slot(server: TestServer) {
  const { apiKey } = await server.newKey({ plan: 'pro' });
  const call = api(server.url, apiKey);
  expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
  const { backupId, blobPath } = (await call('POST', '/api/backups')).body as { backupId: string; blobPath: string };
  const handshake = await call('POST', '/api/backups/upload', {
    json: { type: 'blob.generate-client-token', payload: { pathname: blobPath, clientPayload: null, multipart: true } },
  });
  expect(handshake.status).toBe(200);
  return { call, apiKey, backupId, blobPath, token: handshake.body.clientToken as string };
}

type Slot = Awaited<ReturnType<typeof slot>>;

function mpu(server: TestServer, s: Slot, action: string, headers: Record<string, string> = {}, body?: BodyInit) {
  return api(server.url)('POST', `/blob/mpu?pathname=${encodeURIComponent(s.blobPath)}`, {
    headers: { authorization: `Bearer ${s.token}`, 'x-mpu-action': action, ...headers },
    body,
  });
}

async function create(server: TestServer, s: Slot) {
  const created = await mpu(server, s, 'create');
  expect(created.status).toBe(200);
  return created.body as { key: string; uploadId: string };
}

function part(server: TestServer, s: Slot, upload: { key: string; uploadId: string }, partNumber: number, body: BodyInit) {
  return mpu(
    server,
    s,
    'upload',
    { 'x-mpu-key': encodeURIComponent(upload.key), 'x-mpu-upload-id': upload.uploadId, 'x-mpu-part-number': String(partNumber) },
    body,
  );
}

/** `size` bytes as a chunked body (no Content-Length): only counting while it streams can stop it. */
function chunked(size: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= size) return controller.close();
      const chunk = randomBytes(Math.min(64 * KiB, size - sent));
      sent += chunk.length;
      controller.enqueue(chunk);
    },
  });
}

for (const backend of backends)
  describe.skipIf(backend.skip === true)(`blobhost-client multipart limits: ${backend.name}`, () => {
    let server: TestServer;

    beforeAll(async () => {
      server = await startTestServer({
        env: { ...(await backend.env()), COFFER_UPLOAD_PROTOCOL: 'blobhost-client', COFFER_MAX_ARCHIVE_BYTES: String(LIMIT) },
        config: { maxMultipartUploadsPerSlot: UPLOADS_PER_SLOT },
      });
    });
    afterAll(async () => {
      await server?.stop();
      if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
      await backend.tearDown();
    });

    it('parts adding up past the archive limit are refused as they arrive, and their upload leaves nothing on disk', async () => {
      const s = await slot(server);
      const first = await create(server, s);
      for (const n of [1, 2, 3]) expect((await part(server, s, first, n, randomBytes(300 * KiB))).status).toBe(200);
      // 900 KiB stored; 300 KiB more, streamed without a length, crosses 1 MiB while it arrives.
      const over = await part(server, s, first, 4, chunked(300 * KiB));
      expect(over.status).toBe(413);
      expect(over.body).toEqual({ error: { code: 'bad_request', message: `the file length cannot be greater than ${LIMIT} bytes` } });
      expect(await backend.parts(server, `${s.blobPath}/`)).toEqual(new Map());
      // A client completing the discarded upload anyway gets 404, not a server error (Ceph answers S3's
      // CompleteMultipartUpload of an aborted upload with 500 InternalError).
      const late = await mpu(
        server,
        s,
        'complete',
        { 'x-mpu-key': encodeURIComponent(first.key), 'x-mpu-upload-id': first.uploadId, 'content-type': 'application/json' },
        JSON.stringify([{ partNumber: 1, etag: '"0123456789abcdef0123456789abcdef"' }]),
      );
      expect([late.status, late.body]).toEqual([404, { error: { code: 'not_found', message: 'No such multipart upload.' } }]);

      // The limit is the slot's: a second upload's parts count together with a third one's.
      const second = await create(server, s);
      expect((await part(server, s, second, 1, randomBytes(600 * KiB))).status).toBe(200);
      const third = await create(server, s);
      const declared = await part(server, s, third, 1, randomBytes(500 * KiB));
      expect(declared.status).toBe(413);
      expect([...(await backend.parts(server, `${s.blobPath}/`))]).toEqual([[second.uploadId, [600 * KiB]]]);
      expect((await s.call('GET', `/api/backups/${s.backupId}`)).body.status).toBe('PENDING_UPLOAD');
    });

    it('a part sent again replaces the earlier copy on disk at once and counts once', async () => {
      const s = await slot(server);
      const upload = await create(server, s);
      // Three times 700 KiB under one part number: 2.1 MiB sent, 700 KiB stored.
      for (let i = 0; i < 3; i++) expect((await part(server, s, upload, 1, randomBytes(700 * KiB))).status).toBe(200);
      expect([...(await backend.parts(server, `${s.blobPath}/`))]).toEqual([[upload.uploadId, [700 * KiB]]]);
      const last = randomBytes(200 * KiB);
      const stored = await part(server, s, upload, 1, last);
      expect([...(await backend.parts(server, `${s.blobPath}/`))]).toEqual([[upload.uploadId, [200 * KiB]]]);
      // The running total the blob host keeps in the database agrees.
      expect(await server.parts.stores.multipart.slotBytes(s.backupId)).toBe(200 * KiB);
      const done = await mpu(
        server,
        s,
        'complete',
        { 'x-mpu-key': encodeURIComponent(upload.key), 'x-mpu-upload-id': upload.uploadId, 'content-type': 'application/json' },
        JSON.stringify([{ partNumber: 1, etag: stored.body.etag }]),
      );
      expect(done.status).toBe(200);
      expect((await s.call('GET', `/api/backups/${s.backupId}`)).body).toMatchObject({
        status: 'UPLOADED',
        ciphertextSizeBytes: last.length,
      });
      // The client sending the completion again (its answer lost) gets the same answer, not an error.
      const again = await mpu(
        server,
        s,
        'complete',
        { 'x-mpu-key': encodeURIComponent(upload.key), 'x-mpu-upload-id': upload.uploadId, 'content-type': 'application/json' },
        JSON.stringify([{ partNumber: 1, etag: stored.body.etag }]),
      );
      expect([again.status, again.body]).toEqual([200, done.body]);
      expect([
        await server.parts.stores.multipart.countMultipartUploads(s.backupId),
        await server.parts.stores.multipart.slotBytes(s.backupId),
      ]).toEqual([0, 0]);
    });

    it('a completion the store made but the node did not record is recorded when the client sends it again', async () => {
      const s = await slot(server);
      const upload = await create(server, s);
      const data = randomBytes(300 * KiB);
      const stored = await part(server, s, upload, 1, data);
      expect(stored.status).toBe(200);
      // The store completes the upload, then the node dies before recording it (or its answer is lost).
      await (server.parts.blobs as MultipartBlobStore).completeMultipart(upload.key, upload.uploadId, [
        { partNumber: 1, etag: stored.body.etag },
      ]);
      const retried = await mpu(
        server,
        s,
        'complete',
        { 'x-mpu-key': encodeURIComponent(upload.key), 'x-mpu-upload-id': upload.uploadId, 'content-type': 'application/json' },
        JSON.stringify([{ partNumber: 1, etag: stored.body.etag }]),
      );
      expect(retried.status).toBe(200);
      expect((await s.call('GET', `/api/backups/${s.backupId}`)).body).toMatchObject({
        status: 'UPLOADED',
        ciphertextSizeBytes: data.length,
      });
    });

    it(`a slot has at most ${UPLOADS_PER_SLOT} multipart uploads open`, async () => {
      const s = await slot(server);
      for (let i = 0; i < UPLOADS_PER_SLOT; i++) await create(server, s);
      const refused = await mpu(server, s, 'create');
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual({
        error: { code: 'bad_request', message: `This backup slot already has ${UPLOADS_PER_SLOT} multipart uploads in progress.` },
      });
      expect((await backend.parts(server, `${s.blobPath}/`)).size).toBe(UPLOADS_PER_SLOT);
      // Once the slot takes no upload any more, the sweeper drops its bookkeeping.
      expect((await s.call('DELETE', `/api/backups/${s.backupId}`)).status).toBeLessThan(300);
      await server.parts.sweeper.runOnce({ orphans: false });
      expect(await server.parts.stores.multipart.countMultipartUploads(s.backupId)).toBe(0);
    });
  });

describe('blobhost-client requests that misbehave', () => {
  let server: TestServer;
  const lines: { level: number; msg: string; err?: { stack?: string } }[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    server = await startTestServer({
      env: { COFFER_UPLOAD_PROTOCOL: 'blobhost-client' },
      config: { limits: { ...DEFAULT_LIMITS, minUploadBytesPerSecond: 1000, uploadRateWindowMs: 300 } },
      logger: { level: 'info', stream: sink },
    });
  });
  afterAll(async () => {
    await server?.stop();
    if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
  });

  /** Sends `head`, then `drip` bytes; resolves with what came back once the server closed the connection. */
  function raw(head: string, drip: (socket: net.Socket) => void): Promise<string> {
    return new Promise((resolve, reject) => {
      let received = '';
      const socket = net.connect(Number(new URL(server.url).port), '127.0.0.1', () => {
        socket.write(head);
        drip(socket);
      });
      // Without the guard the request would stay open for the 30-minute request timeout.
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('the server kept the slow upload open'));
      }, 15_000);
      socket.on('data', (chunk) => (received += chunk));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve(received);
      });
    });
  }

  const errorLines = () => lines.filter((line) => line.level >= 50 || Boolean(line.err?.stack));

  /** The log lines with `message`, once there are `count` of them (or after 2 s). */
  async function logged(message: string, count = 1) {
    const found = () => lines.filter((line) => line.msg === message);
    for (let i = 0; i < 100 && found().length < count; i++) await new Promise((r) => setTimeout(r, 20));
    return found();
  }

  it('a /blob PUT that trickles in is cut off like a direct upload, logged at info, nothing stored', async () => {
    const s = await slot(server);
    let timer: NodeJS.Timeout | undefined;
    const head = [
      `PUT /blob/?pathname=${encodeURIComponent(s.blobPath)} HTTP/1.1`,
      'Host: x',
      `Authorization: Bearer ${s.token}`,
      'Content-Length: 100000',
      '',
      '',
    ].join('\r\n');
    const received = await raw(head, (socket) => {
      timer = setInterval(() => socket.writable && socket.write(Buffer.alloc(1, 1)), 100);
      socket.on('close', () => clearInterval(timer));
    }).finally(() => clearInterval(timer));
    expect(received).not.toMatch(/ 200 /);
    expect((await logged('client went away before the answer')).map((line) => line.level)).toEqual([30]);
    expect(errorLines()).toEqual([]);
    expect((await s.call('GET', `/api/backups/${s.backupId}`)).body.status).toBe('PENDING_UPLOAD');
    const blobs: string[] = [];
    for await (const entry of server.parts.blobs.list(`${s.blobPath}/`)) blobs.push(entry.key);
    expect(blobs).toEqual([]);
  });

  it('a client hanging up in the middle of a part is logged at info', async () => {
    const s = await slot(server);
    const upload = (await mpu(server, s, 'create')).body as { key: string; uploadId: string };
    const before = lines.filter((line) => line.msg === 'client went away before the answer').length;
    const head = [
      `POST /blob/mpu?pathname=${encodeURIComponent(s.blobPath)} HTTP/1.1`,
      'Host: x',
      `Authorization: Bearer ${s.token}`,
      'x-mpu-action: upload',
      `x-mpu-key: ${encodeURIComponent(upload.key)}`,
      `x-mpu-upload-id: ${upload.uploadId}`,
      'x-mpu-part-number: 1',
      'Content-Length: 1000000',
      '',
      '',
    ].join('\r\n');
    await raw(head, (socket) => {
      socket.write(randomBytes(100_000));
      setTimeout(() => socket.destroy(), 200);
    });
    expect((await logged('client went away before the answer', before + 1)).map((line) => line.level)).toEqual(Array(before + 1).fill(30));
    expect(errorLines()).toEqual([]);
  });

  it('x-vercel-signature lets only a signed JSON callback past the API key: everything else is 401, then 403', async () => {
    const s = await slot(server);
    const anonymous = api(server.url);
    const signed = { 'x-vercel-signature': 'deadbeef' };
    const binary = await anonymous('POST', `/api/backups/upload?backupId=${s.backupId}`, {
      headers: { ...signed, 'content-type': 'application/octet-stream' },
      body: randomBytes(1000),
    });
    expect(binary.status).toBe(401);
    expect(binary.body.code).toBe('authentication_required');
    const text = await anonymous('POST', '/api/backups/upload', { headers: { ...signed, 'content-type': 'text/plain' }, body: 'hello' });
    expect(text.status).toBe(401);
    const json = await anonymous('POST', '/api/backups/upload', { headers: signed, json: { type: 'blob.upload-completed' } });
    expect(json.status).toBe(401);
    const { apiKey: readOnly } = await server.newKey({ scopes: ['backups:read'] });
    const unscoped = await api(server.url, readOnly)('POST', '/api/backups/upload', {
      headers: { ...signed, 'content-type': 'text/plain' },
      body: 'hello',
    });
    expect(unscoped.status).toBe(403);
    // With the key, the body is judged as usual.
    const keyed = await s.call('POST', '/api/backups/upload', { headers: { ...signed, 'content-type': 'text/plain' }, body: 'hello' });
    expect(keyed.status).toBe(415);
    expect((await s.call('GET', `/api/backups/${s.backupId}`)).body.status).toBe('PENDING_UPLOAD');
    expect(errorLines()).toEqual([]);
  });
});

describe('the sweeper on a store without ListMultipartUploads', () => {
  let s3: TestS3 | undefined;
  let server: TestServer | undefined;
  const lines: { level: number; msg: string; err?: { stack?: string } }[] = [];

  afterAll(async () => {
    await server?.stop();
    if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
    await s3?.close();
  });

  it('warns once that incomplete uploads are not cleaned up, then sweeps without the step (no error)', async () => {
    s3 = await startS3('s3rver', undefined, { listCalls: false });
    const sink = new Writable({
      write(chunk, _encoding, callback) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        callback();
      },
    });
    server = await startTestServer({ env: s3.env, logger: { level: 'info', stream: sink } });
    await server.sweepOnce(); // the start-up sweep, with its orphan pass
    for (let i = 0; i < 2; i++) {
      const report = await server.parts.sweeper.runOnce({ orphans: true });
      expect(report).toMatchObject({ ran: true, incomplete: 0 });
      expect(report.warning).toBeUndefined();
    }
    await server.sweepOnce();
    const warnings = lines.filter((line) => line.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toMatch(/^incomplete multipart uploads are not cleaned up: the S3 store does not implement this call/);
    expect(lines.filter((line) => line.level >= 50 || Boolean(line.err?.stack))).toEqual([]);
  });
});
