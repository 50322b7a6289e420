import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { bytes, createSlot, readyBackup, upload, useServer } from '../helpers/fixture.js';

const clock = new ManualClock(Date.now());
const fx = useServer({ env: { COFFER_MAX_ARCHIVE_BYTES: String(1024 * 1024) }, clock });

/** Every file under the blob directory (what is really stored). */
function storedBlobs(): string[] {
  const root = path.join(fx.server.dataDir, 'blobs');
  return fs.existsSync(root)
    ? (fs.readdirSync(root, { recursive: true, withFileTypes: true }) as fs.Dirent[])
        .filter((e) => e.isFile())
        .map((e) => path.join(e.parentPath, e.name))
    : [];
}

describe('POST /api/backups', () => {
  it('opens a PENDING_UPLOAD slot with direct upload instructions, the cadence header and the archive limit', async () => {
    const { call } = await fx.account({ plan: 'plus' });
    const response = await call('POST', '/api/backups');
    expect(response.status).toBe(201);
    expect(response.headers.get('x-ratelimit-policy')).toBe('1;w=14400;comment="plus plan: 1 backup per 4 hours"');
    expect(response.headers.get('coffer-max-archive-bytes')).toBe(String(1024 * 1024)); // this server's COFFER_MAX_ARCHIVE_BYTES
    const body = response.body;
    expect(body.status).toBe('PENDING_UPLOAD');
    expect(body.upload).toEqual({
      method: 'POST',
      protocol: 'direct',
      uploadUrl: `${fx.server.url}/api/backups/upload?backupId=${body.backupId}`,
      contentType: 'application/octet-stream',
    });
    expect(Date.parse(body.expiresAt) - clock.now()).toBeGreaterThan(59 * 60_000);
    expect(body.expiresAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('needs a vault: 409 vault_not_initialized', async () => {
    const { call } = await fx.account({ vault: false });
    const response = await call('POST', '/api/backups');
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('vault_not_initialized');
  });

  it('allows one slot in flight: 409 upload_in_progress names it', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    const response = await call('POST', '/api/backups');
    expect(response.status).toBe(409);
    expect(response.body).toMatchObject({ code: 'upload_in_progress', details: { backupId: id } });
    // Deleting the slot frees it.
    expect((await call('DELETE', `/api/backups/${id}`)).status).toBe(200);
    expect((await call('POST', '/api/backups')).status).toBe(201);
  });

  it('enforces the plan cadence with 429, Retry-After and details; deleting does not reset it', async () => {
    const { call } = await fx.account({ plan: 'free' });
    const { id } = await readyBackup(call);
    await call('DELETE', `/api/backups/${id}`);
    const response = await call('POST', '/api/backups');
    expect(response.status).toBe(429);
    expect(response.body.code).toBe('backup_cadence_exceeded');
    expect(response.body.details.backupInterval).toBe('1d');
    const retryAfter = Number(response.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(86_400 - 60);
    expect(retryAfter).toBeLessThanOrEqual(86_400);
    expect(Date.parse(response.body.details.nextAllowedAt)).toBeGreaterThan(clock.now());
  });
});

describe('POST /api/backups/upload (direct)', () => {
  it('stores the bytes and moves the record to UPLOADED', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    const data = bytes(5000);
    const response = await upload(call, id, data);
    expect(response.status).toBe(201);
    expect(response.body).toEqual({ pathname: expect.stringContaining(id), size: 5000 });
    const detail = await call('GET', `/api/backups/${id}`);
    expect(detail.body).toMatchObject({ status: 'UPLOADED', ciphertextSizeBytes: 5000 });
  });

  it('accepts a chunked body of unknown length', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    const data = bytes(300_000);
    const stream = new ReadableStream({
      start(controller) {
        for (let i = 0; i < data.length; i += 65_536) controller.enqueue(data.subarray(i, i + 65_536));
        controller.close();
      },
    });
    const response = await call('POST', `/api/backups/upload?backupId=${id}`, {
      body: stream as never,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(response.status).toBe(201);
    expect(response.body.size).toBe(data.length);
  });

  it.each([
    ['application/json', '{}', 415, 'unsupported_media_type'],
    ['text/plain', 'abc', 415, 'unsupported_media_type'],
  ])('refuses content type %s', async (type, body, status, code) => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    const response = await call('POST', `/api/backups/upload?backupId=${id}`, { body, headers: { 'content-type': type } });
    expect(response.status).toBe(status);
    expect(response.body.code).toBe(code);
  });

  it('refuses a missing, malformed, unknown or foreign backupId with 400 on path backupId', async () => {
    const { call } = await fx.account();
    const other = await fx.account();
    const foreign = await createSlot(other.call);
    for (const query of ['', '?backupId=nope', `?backupId=${'0'.repeat(8)}-0000-7000-8000-${'0'.repeat(12)}`, `?backupId=${foreign}`]) {
      const response = await call('POST', `/api/backups/upload${query}`, {
        body: 'x',
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(response.status, query).toBe(400);
      expect(response.body.code).toBe('validation_failed');
      expect(response.body.details.issues[0].path).toBe('backupId');
    }
    expect((await other.call('GET', `/api/backups/${foreign}`)).body.status).toBe('PENDING_UPLOAD');
  });

  it('refuses a declared Content-Length over the limit with 413 before reading', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    const response = await upload(call, id, bytes(1024 * 1024 + 1));
    expect(response.status).toBe(413);
    expect(response.body).toMatchObject({ code: 'payload_too_large', details: { maxBytes: 1024 * 1024 } });
    expect((await call('GET', `/api/backups/${id}`)).body.status).toBe('PENDING_UPLOAD');
  });

  it('cuts off a chunked body that crosses the limit with 413 and leaves nothing behind', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    const before = storedBlobs().length;
    const chunk = bytes(64 * 1024);
    let sent = 0;
    const stream = new ReadableStream({
      pull(controller) {
        if (sent >= 2 * 1024 * 1024) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    const response = await call('POST', `/api/backups/upload?backupId=${id}`, {
      body: stream as never,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(response.status).toBe(413);
    expect(response.body.code).toBe('payload_too_large');
    expect(storedBlobs().length).toBe(before);
    expect(fs.readdirSync(path.join(fx.server.dataDir, 'tmp'))).toEqual([]);
    expect((await call('GET', `/api/backups/${id}`)).body.status).toBe('PENDING_UPLOAD');
    // The slot is still usable.
    expect((await upload(call, id, bytes(10))).status).toBe(201);
  });

  it('lets a client that keeps sending past the limit read its 413 (lingering close)', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const status = await new Promise<number>((resolve, reject) => {
      const request = http.request(`${fx.server.url}/api/backups/upload?backupId=${id}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/octet-stream' },
      });
      let answered = false;
      request.on('response', (response) => {
        answered = true;
        response.resume();
        request.destroy();
        resolve(response.statusCode!);
      });
      request.on('error', (error) => (answered ? undefined : reject(error)));
      const chunk = bytes(64 * 1024);
      const pump = () => {
        // Keep sending, as a streaming client does, until the answer arrives (up to 4× the limit).
        for (let sent = 0; !answered && sent < 4 * 1024 * 1024; sent += chunk.length) {
          if (!request.write(chunk)) return request.once('drain', pump);
        }
        if (!answered) request.end();
      };
      pump();
    });
    expect(status).toBe(413);
    expect((await call('GET', `/api/backups/${id}`)).body.status).toBe('PENDING_UPLOAD');
  });

  it('refuses an upload to a slot that is not PENDING_UPLOAD with 409 invalid_backup_state', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    await upload(call, id, bytes(10));
    const response = await upload(call, id, bytes(20));
    expect(response.status).toBe(409);
    expect(response.body).toMatchObject({ code: 'invalid_backup_state', details: { status: 'UPLOADED' } });
    expect((await call('GET', `/api/backups/${id}`)).body.ciphertextSizeBytes).toBe(10);
  });
});

describe('POST /api/backups/{id}/finalize', () => {
  it('makes an uploaded backup READY with the plan retention', async () => {
    const { call } = await fx.account({ plan: 'plus' });
    const id = await createSlot(call);
    await upload(call, id, bytes(700));
    const body = finalizeBody(700, { clientVersion: 'coffer-cli/0.1.0', hostappVersion: 'notes 2.3' });
    const response = await call('POST', `/api/backups/${id}/finalize`, { json: body });
    expect(response.status).toBe(200);
    const { ciphertextSizeBytes: _, plaintextSizeBytes: __, ...sealed } = body;
    expect(response.body).toMatchObject({ ...sealed, id, status: 'READY', ciphertextSizeBytes: 700 });
    const retentionMs = Date.parse(response.body.expiresAt) - clock.now();
    expect(retentionMs).toBeGreaterThan(29.9 * 86_400_000);
    expect(retentionMs).toBeLessThanOrEqual(30 * 86_400_000);
  });

  it('accepts a wrappedDek of exactly 4,096 bytes (a DEK sealed to a recipient is 1,180)', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    await upload(call, id, bytes(10));
    const wrappedDek = Buffer.alloc(4096, 9).toString('base64');
    const response = await call('POST', `/api/backups/${id}/finalize`, { json: { ...finalizeBody(10), wrappedDek } });
    expect(response.status).toBe(200);
    expect((await call('GET', `/api/backups/${id}`)).body.wrappedDek).toBe(wrappedDek);
  });

  it('refuses a slot still PENDING_UPLOAD (409 invalid_backup_state) and a wrong size (409 ciphertext_size_mismatch)', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    const early = await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(10) });
    expect(early.status).toBe(409);
    expect(early.body).toMatchObject({ code: 'invalid_backup_state', details: { status: 'PENDING_UPLOAD' } });
    await upload(call, id, bytes(10));
    const wrong = await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(11) });
    expect(wrong.status).toBe(409);
    expect(wrong.body.code).toBe('ciphertext_size_mismatch');
    expect((await call('GET', `/api/backups/${id}`)).body.status).toBe('UPLOADED');
    expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(10) })).status).toBe(200);
    const again = await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(10) });
    expect(again.status).toBe(409);
    expect(again.body.details.status).toBe('READY');
  });

  it.each([
    ['cryptoVersion v2', { cryptoVersion: 'v2' }, 'cryptoVersion'],
    ['negative size', { plaintextSizeBytes: -1 }, 'plaintextSizeBytes'],
    ['fractional size', { ciphertextSizeBytes: 1.5 }, 'ciphertextSizeBytes'],
    ['empty metadata', { encryptedMetadata: '' }, 'encryptedMetadata'],
    ['metadata over 64 KiB', { encryptedMetadata: Buffer.alloc(65_537).toString('base64') }, 'encryptedMetadata'],
    ['wrappedDek over 4,096 bytes', { wrappedDek: Buffer.alloc(4097).toString('base64') }, 'wrappedDek'],
    ['wrappedDek far over 4,096 bytes', { wrappedDek: Buffer.alloc(8192).toString('base64') }, 'wrappedDek'],
    ['clientVersion over 64 chars', { clientVersion: 'x'.repeat(65) }, 'clientVersion'],
    ['non-printable hostappVersion', { hostappVersion: 'a\u0001b' }, 'hostappVersion'],
    ['unknown property', { status: 'READY' }, 'status'],
  ])('refuses %s with 400 and leaves the record UPLOADED', async (_name, patch, path) => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    await upload(call, id, bytes(10));
    const response = await call('POST', `/api/backups/${id}/finalize`, { json: { ...finalizeBody(10), ...patch } });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('validation_failed');
    expect(response.body.details.issues.map((i: { path: string }) => i.path)).toContain(path);
    expect((await call('GET', `/api/backups/${id}`)).body.status).toBe('UPLOADED');
  });

  it('answers 404 for an unknown id before looking at the body', async () => {
    const { call } = await fx.account();
    const response = await call('POST', '/api/backups/01a20000-0000-7000-8000-000000000000/finalize', {
      body: 'not json',
      headers: { 'content-type': 'application/json' },
    });
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('backup_not_found');
  });
});

describe('GET /api/backups and /api/backups/{id}', () => {
  it('lists visible backups newest first and hides deleted ones', async () => {
    const { call } = await fx.account();
    const first = await readyBackup(call, 10);
    clock.advance(31 * 60_000);
    const second = await createSlot(call);
    const list = await call('GET', '/api/backups');
    expect(list.body.backups.map((b: { id: string }) => b.id)).toEqual([second, first.id]);
    await call('DELETE', `/api/backups/${second}`);
    expect((await call('GET', '/api/backups')).body.backups.map((b: { id: string }) => b.id)).toEqual([first.id]);
  });

  it('answers 404 backup_not_found for unknown, malformed and deleted ids', async () => {
    const { call } = await fx.account();
    const { id } = await readyBackup(call);
    await call('DELETE', `/api/backups/${id}`);
    for (const bad of [id, 'not-a-uuid', '01a20000-0000-7000-8000-000000000000']) {
      const response = await call('GET', `/api/backups/${bad}`);
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('backup_not_found');
    }
  });
});

describe('DELETE /api/backups/{id}', () => {
  it('removes the blob, answers DELETED with deletedAt, and a second delete is 404', async () => {
    const { call } = await fx.account();
    const { id } = await readyBackup(call);
    const blobsBefore = storedBlobs().filter((f) => f.includes(id));
    expect(blobsBefore).toHaveLength(1);
    const response = await call('DELETE', `/api/backups/${id}`);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ id, status: 'DELETED', deletedAt: expect.any(String) });
    expect(storedBlobs().filter((f) => f.includes(id))).toEqual([]);
    expect((await call('DELETE', `/api/backups/${id}`)).status).toBe(404);
    // The tombstone stays for audit.
    expect((await fx.server.parts.stores.backups.getBackup(id))?.status).toBe('DELETED');
  });
});

describe('GET /api/backups/{id}/content', () => {
  it('streams the exact ciphertext with the download headers', async () => {
    const { call } = await fx.account();
    const { id, data } = await readyBackup(call, 100_000);
    const response = await fetch(`${fx.server.url}/api/backups/${id}/content`, {
      headers: {
        'x-api-key': (await fx.server.newKey({ accountId: (await fx.server.parts.stores.backups.getBackup(id))!.accountId })).apiKey,
      },
    });
    expect(response.status).toBe(200);
    expect(Buffer.from(await response.arrayBuffer()).equals(data)).toBe(true);
    expect(response.headers.get('content-type')).toBe('application/octet-stream');
    expect(response.headers.get('content-length')).toBe('100000');
    expect(response.headers.get('content-disposition')).toBe(`attachment; filename="backup-${id}.bin"`);
    expect(response.headers.get('cache-control')).toBe('private, no-store');
    expect(response.headers.get('accept-ranges')).toBe('bytes');
    expect(response.headers.get('etag')).toMatch(/^".+"$/);
  });

  it('answers a single range with 206 and ignores bad, multiple or stale ranges', async () => {
    const { call } = await fx.account();
    const { id, data } = await readyBackup(call, 1000);
    const ranged = await call('GET', `/api/backups/${id}/content`, { headers: { range: 'bytes=100-199' } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get('content-range')).toBe('bytes 100-199/1000');
    expect(ranged.raw.length).toBe(100);
    const etag = ranged.headers.get('etag')!;
    const resumed = await fetch(`${fx.server.url}/api/backups/${id}/content`, {
      headers: { range: 'bytes=900-', 'if-range': etag, 'x-api-key': '', authorization: await authOf(id) },
    });
    expect(resumed.status).toBe(206);
    expect(Buffer.from(await resumed.arrayBuffer()).equals(data.subarray(900))).toBe(true);
    const ignored: Record<string, string>[] = [
      { range: 'bytes=0-1,5-6' },
      { range: 'bytes=5000-6000' },
      { range: 'pages=1' },
      { range: 'bytes=0-9', 'if-range': '"stale"' },
    ];
    for (const headers of ignored) {
      const response = await call('GET', `/api/backups/${id}/content`, { headers });
      expect(response.status, JSON.stringify(headers)).toBe(200);
      expect(response.headers.get('content-length')).toBe('1000');
    }
  });

  it('answers 404 backup_content_unavailable until the backup is READY', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    await upload(call, id, bytes(10));
    const response = await call('GET', `/api/backups/${id}/content`);
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('backup_content_unavailable');
  });
});

describe('unknown routes and methods', () => {
  it('answers 404 not_found and 405 method_not_allowed with an ErrorResponse', async () => {
    const { call } = await fx.account();
    const missing = await call('GET', '/api/nothing-here');
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('not_found');
    const wrong = await call('PUT', '/api/backups');
    expect(wrong.status).toBe(405);
    expect(wrong.body.code).toBe('method_not_allowed');
    expect(wrong.headers.get('allow')).toBe('GET, POST');
  });
});

async function authOf(backupId: string): Promise<string> {
  const backup = await fx.server.parts.stores.backups.getBackup(backupId);
  return `Bearer ${(await fx.server.newKey({ accountId: backup!.accountId })).apiKey}`;
}

describe('internal errors', () => {
  it('answer 500 internal_error without a stack trace or path, and leave the slot usable', async () => {
    const { call, accountId } = await fx.account();
    const id = await createSlot(call);
    // Make the blob directory for this account impossible to create.
    const accountDir = path.join(fx.server.dataDir, 'blobs', 'backups', accountId);
    fs.mkdirSync(path.dirname(accountDir), { recursive: true });
    fs.writeFileSync(accountDir, 'not a directory');
    const response = await upload(call, id, bytes(100));
    expect(response.status).toBe(500);
    expect(response.body).toEqual({
      error: expect.any(String),
      code: 'internal_error',
      message: response.body.error,
      resolution: expect.any(String),
    });
    expect(response.text).not.toMatch(/ENOTDIR|\/tmp\/|at .*\.js|stack/i);
    expect(fs.readdirSync(path.join(fx.server.dataDir, 'tmp'))).toEqual([]);
    fs.rmSync(accountDir);
    expect((await call('GET', `/api/backups/${id}`)).body.status).toBe('PENDING_UPLOAD');
    expect((await upload(call, id, bytes(100))).status).toBe(201);
  });
});
