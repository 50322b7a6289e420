/** docs/api-rules.md#events: the event stream, with a real EventSource client. */
import http from 'node:http';
import { EventSource } from 'eventsource';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalStatusBus } from '../../src/events/status-bus.js';
import { finalizeBody } from '../helpers/api.js';
import { Conformance } from '../helpers/conformance.js';
import { type Fixture, bytes, createSlot, readyBackup, upload, useServer } from '../helpers/fixture.js';
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

const STREAM_ITEMS = 'openapi.json#/paths/~1api~1backups~1{id}~1events/get/responses/200/content/text~1event-stream/schema/items';

/** Every frame matches the event the document declares for its name, and so does its JSON data. */
function validateFrames(fx: Fixture | { conformance: Conformance }, frames: Frame[]) {
  const stream = (fx.conformance.document as any).paths['/api/backups/{id}/events'].get.responses['200'].content['text/event-stream'];
  const events: any[] = stream.schema.items.anyOf;
  for (const frame of frames) {
    const i = events.findIndex((event) => event.properties?.event?.enum?.[0] === frame.event);
    expect(i, `${frame.event} is declared`).toBeGreaterThanOrEqual(0);
    const wire = { id: frame.id, event: frame.event, data: JSON.stringify(frame.data) };
    fx.conformance.validate(`${STREAM_ITEMS}/anyOf/${i}`, wire, frame.event);
    fx.conformance.validate(`${STREAM_ITEMS}/anyOf/${i}/properties/data/contentSchema`, frame.data, frame.event);
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

  it('serves the exact framing and headers of docs/api-rules.md#events', async () => {
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
    validateFrames(fx, frames);
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
    const store = fx.server.parts.stores.backups;
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
    const created = await (
      await fetch(`${server.url}/api/backups`, { method: 'POST', headers: { authorization: headers.authorization } })
    ).json();
    const stream = follow(server.url, apiKey, created.backupId);
    await stream.until((f) => f.length >= 1);
    await server.stop();
    const frames = await stream.until(closed);
    expect(frames.at(-1)).toMatchObject({ event: 'backup.stream.closed', data: { reason: 'shutdown' } });
    expect(accountId).toBeTruthy();
  });
});

/**
 * A stream over raw HTTP from a chosen loopback source address (Linux routes all of 127/8 to lo), so one test
 * can act as several client addresses. Collects every frame until the server ends the response.
 */
function rawStream(baseUrl: string, apiKey: string, backupId: string, localAddress: string) {
  const frames: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => frames.push(message) });
  const head: { status?: number; type?: string } = {};
  const request = http.get(`${baseUrl}/api/backups/${backupId}/events`, {
    headers: { authorization: `Bearer ${apiKey}` },
    localAddress,
    agent: false,
  });
  const ended = new Promise<void>((resolve) => {
    request.on('error', () => resolve());
    request.on('response', (response) => {
      head.status = response.statusCode;
      head.type = response.headers['content-type'];
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => parser.feed(chunk));
      response.on('close', () => resolve());
    });
  });
  return {
    frames,
    head,
    ended,
    /** The client hangs up. */
    close: () => request.destroy(),
    /** Resolves with the first frame. */
    async first(): Promise<EventSourceMessage> {
      for (let i = 0; i < 250 && frames.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      if (frames.length === 0) throw new Error('no frame arrived');
      return frames[0]!;
    },
  };
}

describe('event-stream caps (docs/api-rules.md#events)', () => {
  const METRICS_TOKEN = 'events-test-metrics-token';
  const fx = useServer({
    env: {
      COFFER_SSE_INTERVAL: '20s',
      COFFER_SSE_MAX_PER_ACCOUNT: '2',
      COFFER_SSE_MAX_PER_ADDRESS: '3',
      COFFER_METRICS_TOKEN: METRICS_TOKEN,
    },
  });
  const open: ReturnType<typeof rawStream>[] = [];
  const stream = (apiKey: string, backupId: string, address: string) => {
    const s = rawStream(fx.server.url, apiKey, backupId, address);
    open.push(s);
    return s;
  };
  afterEach(async () => {
    for (const s of open.splice(0)) s.close();
    await waitForMetric(/^coffer_event_streams_open 0$/m);
  });

  async function metrics(): Promise<string> {
    const response = await fetch(`${fx.server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(response.status).toBe(200);
    return response.text();
  }
  async function waitForMetric(pattern: RegExp): Promise<string> {
    for (let i = 0; ; i++) {
      const text = await metrics();
      if (pattern.test(text)) return text;
      if (i > 250)
        throw new Error(
          `metrics never matched ${pattern}:\n${text
            .split('\n')
            .filter((l) => l.startsWith('coffer_event'))
            .join('\n')}`,
        );
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  const refusedCount = (text: string, limit: string) =>
    Number(new RegExp(`^coffer_event_streams_refused_total\\{limit="${limit}"\\} (\\d+)$`, 'm').exec(text)?.[1]);

  /** A refused stream: 200, text/event-stream, exactly one backup.stream.error frame, then the end. */
  async function expectRefused(s: ReturnType<typeof rawStream>, backupId: string, limit: string, maxStreams: number) {
    await s.ended;
    expect(s.head.status).toBe(200);
    expect(s.head.type).toMatch(/^text\/event-stream/);
    expect(s.frames.map((f) => f.event)).toEqual(['backup.stream.error']);
    const data = JSON.parse(s.frames[0]!.data);
    expect(data).toEqual({
      error: expect.any(String),
      code: 'too_many_streams',
      message: data.error,
      resolution: expect.stringMatching(/Close event streams/),
      details: { limit, maxStreams },
      backupId,
    });
  }

  it('refuses the stream over the account cap in-stream, leaves other accounts alone, and frees a slot on close', async () => {
    const a = await fx.account();
    const b = await fx.account();
    const idA = await createSlot(a.call);
    const idB = await createSlot(b.call);
    const before = await metrics();

    const first = stream(a.apiKey, idA, '127.0.0.2');
    const second = stream(a.apiKey, idA, '127.0.0.3');
    expect((await first.first()).event).toBe('backup.status');
    expect((await second.first()).event).toBe('backup.status');
    // From yet another address: the account's own cap applies.
    await expectRefused(stream(a.apiKey, idA, '127.0.0.4'), idA, 'account', 2);
    // Another account is not held back by A's cap.
    expect((await stream(b.apiKey, idB, '127.0.0.4').first()).event).toBe('backup.status');
    const after = await waitForMetric(/^coffer_event_streams_open 3$/m);
    expect(refusedCount(after, 'account')).toBe(refusedCount(before, 'account') + 1);

    // The client hangs up: its slot is free again.
    first.close();
    await waitForMetric(/^coffer_event_streams_open 2$/m);
    const third = stream(a.apiKey, idA, '127.0.0.2');
    expect((await third.first()).event).toBe('backup.status');
    await expectRefused(stream(a.apiKey, idA, '127.0.0.2'), idA, 'account', 2);

    // A terminal status ends both of A's streams and frees both slots.
    await a.call('DELETE', `/api/backups/${idA}`);
    await Promise.all([second.ended, third.ended]);
    expect(third.frames.at(-1)!.event).toBe('backup.stream.closed');
    const idA2 = await createSlot(a.call);
    for (const address of ['127.0.0.2', '127.0.0.3']) {
      expect((await stream(a.apiKey, idA2, address).first()).event).toBe('backup.status');
    }
  });

  it('releases the slot of a stream that ends at once (a backup already READY)', async () => {
    const a = await fx.account();
    const { id } = await readyBackup(a.call, 8);
    for (let i = 0; i < 5; i++) {
      const s = stream(a.apiKey, id, '127.0.0.7');
      await s.ended;
      expect(s.frames.map((f) => f.event)).toEqual(['backup.status', 'backup.stream.closed']);
    }
    await waitForMetric(/^coffer_event_streams_open 0$/m);
  });

  it('caps open streams per client address, across accounts', async () => {
    const accounts = await Promise.all([fx.account(), fx.account()]);
    const [a, b] = await Promise.all(accounts.map(async (x) => ({ ...x, id: await createSlot(x.call) })));
    const before = await metrics();
    for (const s of [stream(a!.apiKey, a!.id, '127.0.0.5'), stream(a!.apiKey, a!.id, '127.0.0.5'), stream(b!.apiKey, b!.id, '127.0.0.5')]) {
      expect((await s.first()).event).toBe('backup.status');
    }
    await expectRefused(stream(b!.apiKey, b!.id, '127.0.0.5'), b!.id, 'address', 3);
    // The same account from another address is within both caps.
    expect((await stream(b!.apiKey, b!.id, '127.0.0.6').first()).event).toBe('backup.status');
    const after = await waitForMetric(/^coffer_event_streams_open 4$/m);
    expect(refusedCount(after, 'address')).toBe(refusedCount(before, 'address') + 1);
    expect(refusedCount(after, 'account')).toBe(refusedCount(before, 'account'));
  });
});

/**
 * The periodic frames and timeouts of all streams run from one shared timer (src/events/heartbeat-wheel.ts). No
 * timing assertions: frames are counted until each stream has enough, within a generous bound.
 */
describe('one shared timer for every stream', () => {
  const STREAMS = 60;
  const fx = useServer({
    env: { COFFER_SSE_INTERVAL: '50ms', COFFER_SSE_TIMEOUT: '5m', COFFER_SSE_MAX_PER_ACCOUNT: '1000', COFFER_SSE_MAX_PER_ADDRESS: '1000' },
  });
  const open: ReturnType<typeof rawStream>[] = [];
  afterEach(() => {
    for (const s of open.splice(0)) s.close();
  });

  const statusCount = (s: ReturnType<typeof rawStream>) => s.frames.filter((f) => f.event === 'backup.status').length;
  async function eventually(what: string, check: () => boolean): Promise<void> {
    for (let i = 0; !check(); i++) {
      if (i > 1000) throw new Error(`never happened: ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('sends periodic frames on many concurrent streams, and a client that hangs up leaves the timer', async () => {
    const hub = fx.server.streams;
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    expect(hub.timerStats()).toMatchObject({ members: 0, running: false });

    for (let i = 0; i < STREAMS; i++) open.push(rawStream(fx.server.url, apiKey, id, '127.0.0.1'));
    await Promise.all(open.map((s) => s.first()));
    expect(hub.timerStats()).toMatchObject({ members: STREAMS, running: true });

    // Every stream gets periodic frames (the first frame is sent at open; the rest come from the shared timer).
    await eventually('4 status frames on every stream', () => open.every((s) => statusCount(s) >= 4));

    // Half the clients hang up: they leave the timer's set, the others keep receiving frames.
    const leaving = open.slice(0, STREAMS / 2);
    const staying = open.slice(STREAMS / 2);
    for (const s of leaving) s.close();
    await Promise.all(leaving.map((s) => s.ended));
    await eventually('hung-up streams leave the shared timer', () => hub.timerStats().members === STREAMS / 2);
    expect(hub.size).toBe(STREAMS / 2);
    const before = staying.map(statusCount);
    await eventually('3 more frames on every remaining stream', () => staying.every((s, i) => statusCount(s) >= before[i]! + 3));
    for (const s of staying) {
      expect(s.frames.every((f) => f.event === 'backup.status' && JSON.parse(f.data).backupId === id)).toBe(true);
      // Frame ids count up one by one on each stream (docs/api-rules.md#events).
      expect(s.frames.map((f) => Number(f.id))).toEqual(s.frames.map((_, i) => i + 1));
    }

    // The last ones hang up: the set is empty and the timer stops.
    for (const s of staying) s.close();
    await eventually('the shared timer stops with no stream open', () => !hub.timerStats().running);
    expect(hub.timerStats().members).toBe(0);
    expect(hub.size).toBe(0);
  });

  it('a terminal status takes every stream of the backup off the timer', async () => {
    const hub = fx.server.streams;
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    const streams = Array.from({ length: 10 }, () => rawStream(fx.server.url, apiKey, id, '127.0.0.1'));
    open.push(...streams);
    await Promise.all(streams.map((s) => s.first()));
    expect(hub.timerStats().members).toBe(10);
    await call('DELETE', `/api/backups/${id}`);
    await Promise.all(streams.map((s) => s.ended));
    for (const s of streams) expect(JSON.parse(s.frames.at(-1)!.data)).toMatchObject({ reason: 'terminal', status: 'DELETED' });
    await eventually('closed streams leave the shared timer', () => hub.timerStats().members === 0);
    expect(hub.timerStats().running).toBe(false);
  });
});
