/** Races and broken connections: the database decides, and nothing half-done is left behind. */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { type Fixture, bytes, createSlot, readyBackup, upload, useServer } from '../helpers/fixture.js';

const clock = new ManualClock(Date.now());
const fx = useServer({ clock });

function blobFiles(fixture: Fixture, backupId: string): string[] {
  const root = path.join(fixture.server.dataDir, 'blobs');
  if (!fs.existsSync(root)) return [];
  return (fs.readdirSync(root, { recursive: true }) as string[])
    .filter((name) => name.includes(backupId) && name.endsWith('.bin'))
    .map((name) => path.join(root, name));
}

const tmpFiles = (fixture: Fixture) => fs.readdirSync(path.join(fixture.server.dataDir, 'tmp'));

describe('concurrency', () => {
  it('12 concurrent creates for one account give exactly one 201', async () => {
    const { call } = await fx.account();
    const responses = await Promise.all(Array.from({ length: 12 }, () => call('POST', '/api/backups')));
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(11);
    const winner = responses.find((r) => r.status === 201)!.body.backupId;
    for (const loser of responses.filter((r) => r.status === 409)) {
      expect(loser.body).toMatchObject({ code: 'upload_in_progress', details: { backupId: winner } });
    }
    expect((await call('GET', '/api/backups')).body.backups).toHaveLength(1);
  });

  it('finalize racing delete always ends DELETED with no blob', async () => {
    for (let round = 0; round < 8; round++) {
      clock.advance(31 * 60_000);
      const { call } = await fx.account();
      const id = await createSlot(call);
      await upload(call, id, bytes(100));
      const [finalized, deleted] = await Promise.all([
        call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(100) }),
        call('DELETE', `/api/backups/${id}`),
      ]);
      expect([200, 404, 409]).toContain(finalized.status);
      expect(deleted.status, `round ${round}: finalize ${finalized.status}, delete ${deleted.text}`).toBe(200);
      expect((await fx.server.parts.stores.backups.getBackup(id))!.status).toBe('DELETED');
      expect(blobFiles(fx, id)).toEqual([]);
    }
  });

  it('upload racing upload of the same slot: one 201, one 409, and the stored bytes are the winner’s', async () => {
    for (let round = 0; round < 5; round++) {
      const { call } = await fx.account();
      const id = await createSlot(call);
      const bodies = [bytes(200_000, 1), bytes(150_000, 2)];
      const responses = await Promise.all(bodies.map((body) => upload(call, id, body)));
      expect(responses.map((r) => r.status).sort()).toEqual([201, 409]);
      const winner = bodies[responses.findIndex((r) => r.status === 201)]!;
      const files = blobFiles(fx, id);
      expect(files).toHaveLength(1);
      expect(fs.readFileSync(files[0]!).equals(winner)).toBe(true);
      expect((await call('GET', `/api/backups/${id}`)).body.ciphertextSizeBytes).toBe(winner.length);
      expect(tmpFiles(fx)).toEqual([]);
    }
  });
});

describe('aborted uploads', () => {
  it('a client that disconnects mid-upload leaves no blob, no temp file, and the slot PENDING_UPLOAD', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const url = new URL(`${fx.server.url}/api/backups/upload?backupId=${id}`);
    await new Promise<void>((resolve) => {
      const request = http.request(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/octet-stream',
          'content-length': String(10 * 1024 * 1024),
        },
      });
      request.on('error', () => resolve());
      request.write(bytes(512 * 1024));
      // Give the server time to start writing the temp file, then vanish.
      setTimeout(() => {
        request.destroy();
        resolve();
      }, 200);
    });
    // The server notices the broken connection asynchronously.
    const deadline = Date.now() + 5000;
    while (tmpFiles(fx).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(tmpFiles(fx)).toEqual([]);
    expect(blobFiles(fx, id)).toEqual([]);
    expect((await call('GET', `/api/backups/${id}`)).body.status).toBe('PENDING_UPLOAD');
    // The client may retry.
    expect((await upload(call, id, bytes(1000))).status).toBe(201);
  });
});

describe('sweeper', () => {
  it('moves an expired pending slot to FAILED, then prunes it to a DELETED tombstone', async () => {
    const { call } = await fx.account();
    const id = await createSlot(call);
    const seen: string[] = [];
    const unsubscribe = fx.server.parts.bus.subscribe(id, (backup) => seen.push(backup.status));
    clock.advance(60 * 60_000 + 1);
    await fx.server.sweepOnce();
    unsubscribe();
    expect(seen).toEqual(['FAILED', 'DELETING', 'DELETED']);
    expect((await fx.server.parts.stores.backups.getBackup(id))!.status).toBe('DELETED');
    expect((await call('GET', `/api/backups/${id}`)).status).toBe(404);
    // The slot no longer blocks a new backup.
    expect((await call('POST', '/api/backups')).status).toBe(201);
  });

  it('removes the blob of an expired UPLOADED slot', async () => {
    clock.advance(31 * 60_000);
    const { call } = await fx.account();
    const id = await createSlot(call);
    await upload(call, id, bytes(100));
    expect(blobFiles(fx, id)).toHaveLength(1);
    clock.advance(60 * 60_000 + 1);
    await fx.server.sweepOnce();
    expect((await fx.server.parts.stores.backups.getBackup(id))!.status).toBe('DELETED');
    expect(blobFiles(fx, id)).toEqual([]);
  });

  it('prunes READY backups past their retention, also when a list is built', async () => {
    clock.advance(31 * 60_000);
    const { call } = await fx.account({ plan: 'free' });
    const { id } = await readyBackup(call);
    clock.advance(7 * 86_400_000 - 1000);
    expect((await call('GET', '/api/backups')).body.backups).toHaveLength(1);
    clock.advance(2000);
    expect((await call('GET', '/api/backups')).body.backups).toEqual([]);
    expect((await fx.server.parts.stores.backups.getBackup(id))!.status).toBe('DELETED');
    expect(blobFiles(fx, id)).toEqual([]);
  });

  it('finishes a delete that a crash interrupted (DELETING with its blob still there)', async () => {
    clock.advance(31 * 60_000);
    const { call } = await fx.account();
    const { id } = await readyBackup(call);
    await fx.server.parts.stores.backups.updateBackup(id, { statuses: ['READY'] }, { status: 'DELETING' });
    expect(blobFiles(fx, id)).toHaveLength(1);
    await fx.server.sweepOnce();
    expect((await fx.server.parts.stores.backups.getBackup(id))!.status).toBe('DELETED');
    expect(blobFiles(fx, id)).toEqual([]);
  });
});
