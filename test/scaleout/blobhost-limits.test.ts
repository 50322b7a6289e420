/**
 * Abuse limits of the blobhost-client blob host, through real HTTP on a loopback port:
 * - multipart uploads: the archive limit holds for the bytes a slot's open uploads store while parts arrive,
 *   a part sent again replaces the earlier copy on disk at once, and a slot has a bounded number of open
 *   uploads (files and S3 via s3rver, counting what each backend holds on disk);
 * - `/blob` bodies that trickle in are cut off like direct uploads, and a client hang-up is logged at info;
 * - `x-vercel-signature` does not let a request that is not a signed JSON callback past the API key check.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { api, envelope } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const KiB = 1024;

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

  const errorLines = () => lines.filter((line) => line.level >= 50 || Boolean(line.err?.stack));

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
