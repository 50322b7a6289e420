/** Operations and hardening: probes, metrics, headers, CORS, slow clients, logs, snapshots, disk exhaustion. */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { openSqliteDatabase } from '../../src/store/sqlite-driver.js';
import { envelope } from '../helpers/api.js';
import { bytes, createSlot, readyBackup, upload, useServer } from '../helpers/fixture.js';
import { isRoot, lacking } from '../helpers/required.js';
import { startTestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';

const METRICS_TOKEN = 'test-metrics-token-0123456789';
const scrape = (url: string, token = METRICS_TOKEN) => fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });

describe('probes and metrics', () => {
  const fx = useServer({ env: { COFFER_METRICS_TOKEN: METRICS_TOKEN } });

  it('/readyz reports the database and blob store reachable', async () => {
    const response = await fetch(`${fx.server.url}/readyz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ready', checks: { database: 'ok', blobs: 'ok' } });
  });

  it('/metrics exposes request, upload, stream and sweeper metrics in Prometheus format', async () => {
    const { call } = await fx.account();
    await readyBackup(call, 1234);
    await fx.server.sweepOnce();
    const response = await scrape(fx.server.url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    expect(text).toMatch(/coffer_http_requests_total\{method="POST",route="\/api\/backups\/:id\/finalize",status="200"\} 1/);
    expect(text).toMatch(/coffer_http_request_duration_seconds_bucket\{le="[^"]+",method="POST",route="\/api\/backup-account\/bootstrap"/);
    expect(text).toMatch(/coffer_upload_bytes_total 1234/);
    expect(text).toMatch(/coffer_event_streams_open 0/);
    expect(text).toMatch(/coffer_event_streams_refused_total\{limit="account"\} 0/);
    expect(text).toMatch(/coffer_sweeper_runs_total\{outcome="ok"\} [1-9]/);
  });

  it('/metrics answers 401 without the metrics token, or with another credential', async () => {
    const { apiKey } = await fx.account();
    const attempts = [
      await fetch(`${fx.server.url}/metrics`),
      await scrape(fx.server.url, `${METRICS_TOKEN}x`),
      await scrape(fx.server.url, METRICS_TOKEN.slice(0, -1)),
      await scrape(fx.server.url, apiKey),
      await fetch(`${fx.server.url}/metrics`, { headers: { authorization: METRICS_TOKEN } }),
    ];
    for (const response of attempts) {
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
      const body = await response.json();
      expect(body).toMatchObject({ code: 'authentication_required', resolution: expect.stringContaining('COFFER_METRICS_TOKEN') });
      expect(JSON.stringify(body)).not.toMatch(/coffer_|nodejs/);
    }
  });
});

describe('metrics without COFFER_METRICS_TOKEN', () => {
  const fx = useServer();

  it('are not served at all: /metrics is an unknown path, whatever credential is sent', async () => {
    const { apiKey } = await fx.account();
    const attempts: Record<string, string>[] = [{}, { authorization: `Bearer ${apiKey}` }, { authorization: 'Bearer ' }];
    for (const headers of attempts) {
      const response = await fetch(`${fx.server.url}/metrics`, { headers });
      expect(response.status).toBe(404);
      expect(await response.text()).not.toMatch(/coffer_upload_bytes_total|nodejs_version/);
    }
  });
});

describe('headers and CORS', () => {
  const fx = useServer();

  it('sends security headers and a request id on API responses, including errors', async () => {
    const response = await fetch(`${fx.server.url}/api/backups`);
    expect(response.status).toBe(401);
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('referrer-policy')).toBe('no-referrer');
    expect(response.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers API preflights with explicit headers and never allows credentials', async () => {
    const response = await fetch(`${fx.server.url}/api/backups`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://elsewhere.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization',
      },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(response.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(response.headers.get('access-control-allow-credentials')).toBeNull();
    const simple = await fetch(`${fx.server.url}/api/backups`, { headers: { origin: 'https://elsewhere.example' } });
    expect(simple.headers.get('access-control-expose-headers')).toMatch(/Retry-After.*X-Coffer-Account-Id/);
  });

  it('puts a CSP on /api-docs', async () => {
    const response = await fetch(`${fx.server.url}/api-docs`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-security-policy')).toMatch(/script-src/);
  });
});

describe('slow clients', () => {
  const fx = useServer({
    config: {
      limits: {
        headersTimeoutMs: 500,
        requestTimeoutMs: 60_000,
        keepAliveTimeoutMs: 500,
        minUploadBytesPerSecond: 50_000,
        uploadRateWindowMs: 300,
        maxConnections: 1000,
      },
    },
  });

  /** Opens a raw connection, sends `head`, and resolves with everything received until the server closes it. */
  function rawExchange(head: string, drip?: (socket: net.Socket) => void): Promise<{ closedAfterMs: number; received: string }> {
    const url = new URL(fx.server.url);
    return new Promise((resolve) => {
      const started = Date.now();
      let received = '';
      const socket = net.connect(Number(url.port), url.hostname, () => {
        socket.write(head);
        drip?.(socket);
      });
      socket.on('data', (chunk) => (received += chunk));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve({ closedAfterMs: Date.now() - started, received }));
    });
  }

  it('closes a connection whose headers never finish', async () => {
    const { closedAfterMs } = await rawExchange('GET /api/backups HTTP/1.1\r\nHost: x\r\n');
    expect(closedAfterMs).toBeLessThan(20_000);
  });

  it('closes idle keep-alive connections', async () => {
    // Two requests on one connection (it is kept alive), then silence: the server ends the connection (its FIN
    // arrives; this side never ends it), with a bound against a hang far above keepAliveTimeoutMs (500 ms).
    const url = new URL(fx.server.url);
    const socket = net.connect(Number(url.port), url.hostname);
    socket.on('error', () => undefined);
    let received = '';
    const responses = () => received.split('HTTP/1.1 200').length - 1;
    let onData: () => void = () => undefined;
    socket.on('data', (chunk) => {
      received += chunk;
      onData();
    });
    const responded = (n: number) => new Promise<void>((resolve) => (onData = () => responses() >= n && resolve()));
    const endedByServer = new Promise<boolean>((resolve) => {
      socket.once('end', () => resolve(true));
      setTimeout(() => resolve(false), 10_000).unref();
    });
    const request = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
    try {
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.write(request);
      await responded(1);
      expect(received).not.toMatch(/connection: close/i);
      socket.write(request);
      await responded(2);
      expect(responses()).toBe(2);
      expect(await endedByServer, 'the idle connection was still open after 10 s').toBe(true);
    } finally {
      socket.destroy();
    }
  });

  it('cuts off a slow-drip upload, leaving no blob and the slot PENDING_UPLOAD', async () => {
    const { call, apiKey } = await fx.account();
    const id = await createSlot(call);
    let timer: NodeJS.Timeout | undefined;
    const { received } = await rawExchange(
      [
        `POST /api/backups/upload?backupId=${id} HTTP/1.1`,
        'Host: x',
        `Authorization: Bearer ${apiKey}`,
        'Content-Type: application/octet-stream',
        'Content-Length: 1000000',
        '',
        '',
      ].join('\r\n'),
      (socket) => {
        timer = setInterval(() => socket.writable && socket.write(Buffer.alloc(10, 1)), 50);
        socket.on('close', () => clearInterval(timer));
      },
    );
    clearInterval(timer);
    expect(received).not.toMatch(/ 201 /);
    const tmp = path.join(fx.server.dataDir, 'tmp');
    for (let i = 0; i < 100 && fs.readdirSync(tmp).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(fs.readdirSync(tmp)).toEqual([]);
    expect((await call('GET', `/api/backups/${id}`)).body.status).toBe('PENDING_UPLOAD');
    expect((await upload(call, id, bytes(100))).status).toBe(201);
  });
});

describe('logs', () => {
  it('are JSON lines with request ids and never contain keys, wrapped keys or bodies', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(...String(chunk).split('\n').filter(Boolean));
        done();
      },
    });
    const server = await startTestServer({ logger: { level: 'trace', stream: sink } });
    try {
      const { apiKey } = await server.newKey({ plan: 'pro' });
      const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
      const secret = envelope(7);
      await fetch(`${server.url}/api/backup-account/bootstrap`, { method: 'POST', headers, body: JSON.stringify(secret) });
      await fetch(`${server.url}/api/backups`, { method: 'GET', headers: { 'x-api-key': apiKey } });
      await fetch(`${server.url}/api/backup-account/rotate`, { method: 'POST', headers, body: '{"broken' });
      // A client that hangs up mid-upload is not a server error.
      const { backupId } = await (await fetch(`${server.url}/api/backups`, { method: 'POST', headers: { 'x-api-key': apiKey } })).json();
      await new Promise<void>((resolve) => {
        const request = http.request(`${server.url}/api/backups/upload?backupId=${backupId}`, {
          method: 'POST',
          headers: { 'x-api-key': apiKey, 'content-type': 'application/octet-stream', 'content-length': '1000000' },
        });
        request.on('error', () => resolve());
        request.write(Buffer.alloc(100_000));
        setTimeout(() => {
          request.destroy();
          resolve();
        }, 200);
      });
      for (let i = 0; i < 50 && !lines.some((line) => line.includes('client went away')); i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(lines.some((line) => line.includes('client went away'))).toBe(true);
      expect(lines.filter((line) => JSON.parse(line).level >= 50)).toEqual([]);
      expect(lines.length).toBeGreaterThan(3);
      for (const line of lines) JSON.parse(line);
      expect(lines.some((line) => JSON.parse(line).reqId)).toBe(true);
      const all = lines.join('\n');
      expect(all).not.toContain(apiKey);
      expect(all).not.toContain(apiKey.slice(4, 20));
      expect(all).not.toContain(secret.wrappedMasterKey);
      expect(all).not.toContain(secret.kdf.salt);
      expect(all).not.toContain('{"broken');
    } finally {
      await server.stop();
    }
  });
});

describe('coffer admin snapshot', () => {
  const fx = useServer();

  it('writes a consistent copy of the live database', async () => {
    const { call, accountId } = await fx.account();
    await readyBackup(call);
    const target = path.join(tempDir(), 'snapshot.sqlite');
    const result = spawnSync(process.execPath, ['dist/cli/main.js', 'admin', 'snapshot', target, '--json'], {
      env: { ...process.env, COFFER_DATA_DIR: fx.server.dataDir },
      encoding: 'utf8',
    });
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ file: target, bytes: fs.statSync(target).size });
    const copy = await openSqliteDatabase(target, { readonly: true });
    try {
      expect(copy.prepare('pragma integrity_check').all([])).toEqual([{ integrity_check: 'ok' }]);
      const row = copy.prepare('select status from backups where account_id = ?').get([accountId]) as { status: string };
      expect(row.status).toBe('READY');
    } finally {
      copy.close();
    }
    const again = spawnSync(process.execPath, ['dist/cli/main.js', 'admin', 'snapshot', target], {
      env: { ...process.env, COFFER_DATA_DIR: fx.server.dataDir },
      encoding: 'utf8',
    });
    expect(again.status).toBe(1);
    expect(again.stderr).toContain('already exists');
  });
});

describe('disk exhaustion', () => {
  // Mounting a tmpfs needs root (CI runs as root).
  it.skipIf(lacking(isRoot, 'root'))('answers 500 internal_error, leaves no partial blob, and keeps serving', async () => {
    // Mounted here, not while the file is collected: listing or filtering the tests mounts nothing.
    const mountPoint = tempDir('coffer-tmpfs-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mountPoint], { stdio: 'ignore' });
    try {
      const server = await startTestServer({ dataDir: mountPoint });
      try {
        const { apiKey } = await server.newKey({ plan: 'pro' });
        const headers = { authorization: `Bearer ${apiKey}` };
        await fetch(`${server.url}/api/backup-account/bootstrap`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify(envelope()),
        });
        const { backupId } = await (await fetch(`${server.url}/api/backups`, { method: 'POST', headers })).json();
        const tooBig = await fetch(`${server.url}/api/backups/upload?backupId=${backupId}`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/octet-stream' },
          body: new Uint8Array(bytes(5 * 1024 * 1024)),
        });
        expect(tooBig.status).toBe(500);
        expect((await tooBig.json()).code).toBe('internal_error');
        expect(fs.readdirSync(path.join(mountPoint, 'tmp'))).toEqual([]);
        const detail = await (await fetch(`${server.url}/api/backups/${backupId}`, { headers })).json();
        expect(detail.status).toBe('PENDING_UPLOAD');
        const small = await fetch(`${server.url}/api/backups/upload?backupId=${backupId}`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/octet-stream' },
          body: new Uint8Array(bytes(1000)),
        });
        expect(small.status).toBe(201);
      } finally {
        await server.stop();
      }
    } finally {
      execFileSync('umount', [mountPoint]);
    }
  });
});
