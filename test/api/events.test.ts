/** CONTRACT §8: the event stream, with a real EventSource client. */
import { EventSource } from 'eventsource';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { describe, expect, it } from 'vitest';
import { LocalStatusBus } from '../../src/events/status-bus.js';
import { finalizeBody } from '../helpers/api.js';
import { Conformance } from '../helpers/conformance.js';
import { type Fixture, bytes, createSlot, upload, useServer } from '../helpers/fixture.js';
import { startTestServer } from '../helpers/server.js';

interface Frame {
  event: string;
  data: any;
  id: string;
}

/** Opens a real EventSource and collects its frames. */
function follow(baseUrl: string, apiKey: string, backupId: string) {
  const frames: Frame[] = [];
  const waiters: (() => void)[] = [];
  const source = new EventSource(`${baseUrl}/api/backups/${backupId}/events`, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${apiKey}` } }),
  });
  for (const event of ['backup.status', 'backup.stream.closed', 'backup.stream.error']) {
    source.addEventListener(event, (message) => {
      frames.push({ event, data: JSON.parse(message.data), id: message.lastEventId });
      if (event !== 'backup.status') source.close();
      waiters.splice(0).forEach((wake) => wake());
    });
  }
  return {
    frames,
    source,
    async until(predicate: (frames: Frame[]) => boolean, timeoutMs = 5000): Promise<Frame[]> {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(frames)) {
        if (Date.now() > deadline) throw new Error(`timed out; frames: ${JSON.stringify(frames)}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return frames;
    },
  };
}

const closed = (frames: Frame[]) => frames.some((f) => f.event !== 'backup.status');

function validateFrames(fx: Fixture | { conformance: Conformance }, frames: Frame[]) {
  for (const frame of frames.filter((f) => f.event === 'backup.status')) {
    fx.conformance.validate('#/components/schemas/BackupStatusEvent', frame.data, 'backup.status');
  }
}

describe('event stream with a long interval (changes must be pushed)', () => {
  const fx = useServer({ env: { COFFER_SSE_INTERVAL: '20s' } });

  it('sends the first frame at once, pushes each change, and closes after a terminal status', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const stream = follow(fx.server.url, apiKey, id);
    await stream.until((f) => f.length >= 1);
    expect(stream.frames[0]).toMatchObject({ event: 'backup.status', id: '1', data: { backupId: id, status: 'PENDING_UPLOAD' } });

    await upload(call, id, bytes(32));
    await stream.until((f) => f.some((x) => x.data.status === 'UPLOADED'));
    await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(32) });
    const frames = await stream.until(closed);

    // With a 20 s interval, only pushes can explain these frames arriving within the test.
    expect(frames.map((f) => [f.event, f.data.status])).toEqual([
      ['backup.status', 'PENDING_UPLOAD'],
      ['backup.status', 'UPLOADED'],
      ['backup.status', 'READY'],
      ['backup.stream.closed', 'READY'],
    ]);
    expect(frames.map((f) => f.id)).toEqual(['1', '2', '3', '4']);
    expect(frames[2]!.data).toMatchObject({ ciphertextSizeBytes: 32, plaintextSizeBytes: 32 });
    expect(frames[3]!.data).toEqual({ backupId: id, reason: 'terminal', status: 'READY', observedAt: expect.any(String) });
    validateFrames(fx, frames);
  });

  it('follows a delete to DELETED', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const stream = follow(fx.server.url, apiKey, id);
    await stream.until((f) => f.length >= 1);
    await call('DELETE', `/api/backups/${id}`);
    const frames = await stream.until(closed);
    expect(frames.map((f) => f.data.status)).toEqual(['PENDING_UPLOAD', 'DELETING', 'DELETED', 'DELETED']);
    expect(frames.at(-1)!.data.reason).toBe('terminal');
  });

  it('serves the exact framing and headers of CONTRACT §8', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    await upload(call, id, bytes(8));
    await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(8) });
    const response = await fetch(`${fx.server.url}/api/backups/${id}/events`, {
      headers: { authorization: `Bearer ${apiKey}`, accept: 'application/json' },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(response.headers.get('cache-control')).toBe('no-store, no-transform');
    expect(response.headers.get('x-accel-buffering')).toBe('no');
    const text = await response.text();
    expect(text.startsWith('retry: 2000\n\n')).toBe(true);
    const messages: EventSourceMessage[] = [];
    const parser = createParser({ onEvent: (message) => messages.push(message) });
    parser.feed(text);
    expect(messages.map((m) => [m.id, m.event])).toEqual([
      ['1', 'backup.status'],
      ['2', 'backup.stream.closed'],
    ]);
    expect(text).toMatch(/^id: 1\nevent: backup\.status\ndata: \{.*\}\n\n/m);
  });

  it('answers 404 as plain JSON for an unknown id, before any stream', async () => {
    const { call } = await fx.account();
    const response = await call('GET', '/api/backups/01a20000-0000-7000-8000-000000000000/events');
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('ends every open stream with backup.stream.error when the status feed fails', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const stream = follow(fx.server.url, apiKey, id);
    await stream.until((f) => f.length >= 1);
    (fx.server.parts.bus as LocalStatusBus).fail(new Error('status feed lost'));
    const frames = await stream.until(closed);
    const error = frames.at(-1)!;
    expect(error.event).toBe('backup.stream.error');
    expect(error.data).toMatchObject({ backupId: id, code: 'internal_error', resolution: expect.any(String) });
    expect(JSON.stringify(error.data)).not.toContain('status feed lost');
  });
});

describe('event stream interval and timeout', () => {
  const fx = useServer({ env: { COFFER_SSE_INTERVAL: '100ms', COFFER_SSE_TIMEOUT: '700ms' } });

  it('repeats the status every interval and closes with reason timeout', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const stream = follow(fx.server.url, apiKey, id);
    const frames = await stream.until(closed);
    const statuses = frames.filter((f) => f.event === 'backup.status');
    expect(statuses.length).toBeGreaterThanOrEqual(3);
    expect(new Set(statuses.map((f) => f.data.status))).toEqual(new Set(['PENDING_UPLOAD']));
    expect(frames.at(-1)).toMatchObject({ event: 'backup.stream.closed', data: { reason: 'timeout', status: 'PENDING_UPLOAD' } });
    validateFrames(fx, frames);
  });

  it('does not read the database per stream per interval', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const store = fx.server.parts.store;
    let reads = 0;
    const original = store.getBackup.bind(store);
    store.getBackup = async (backupId: string) => {
      reads += 1;
      return original(backupId);
    };
    try {
      const streams = Array.from({ length: 20 }, () => follow(fx.server.url, apiKey, id));
      await Promise.all(streams.map((s) => s.until(closed)));
      // One read per stream when it opens; none for the ~6 interval frames each stream then sends.
      expect(reads).toBe(20);
      expect(streams.every((s) => s.frames.length >= 4)).toBe(true);
    } finally {
      store.getBackup = original;
    }
  });
});

describe('shutdown', () => {
  it('sends backup.stream.closed with reason shutdown to open streams', async () => {
    const server = await startTestServer({ env: { COFFER_SSE_INTERVAL: '10s' } });
    const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const b64 = (n: number) => Buffer.alloc(n, 1).toString('base64');
    await fetch(`${server.url}/api/backup-account/bootstrap`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        cryptoVersion: 'v1',
        kdf: { salt: b64(16), opslimit: 1, memlimit: 1 },
        wrappedMasterKey: b64(32),
        wrappedMasterKeyNonce: b64(24),
      }),
    });
    const created = await (await fetch(`${server.url}/api/backups`, { method: 'POST', headers: { authorization: headers.authorization } })).json();
    const stream = follow(server.url, apiKey, created.backupId);
    await stream.until((f) => f.length >= 1);
    await server.stop();
    const frames = await stream.until(closed);
    expect(frames.at(-1)).toMatchObject({ event: 'backup.stream.closed', data: { reason: 'shutdown' } });
    expect(accountId).toBeTruthy();
  });
});
