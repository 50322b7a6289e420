/**
 * The client's transport against hostile and broken servers on loopback, through the real CLI: every API request
 * has a total deadline and a cap on what it reads, uploads and downloads fail when they stall, `coffer run` has an
 * overall deadline after which it fails as a network failure (onFailure and the notifications run), and https://
 * against a plain-HTTP server is said in words. Bounds here are hang guards (the old code hung until killed).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, baseEnv, CLI, cliFor } from './helpers.js';
import { stallingProxy } from './proxy.js';

/** The hang guard of one CLI run: far above what each test needs (a few seconds), far below "forever". */
const GUARD_MS = 90_000;

interface Bounded {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The CLI process's peak resident memory (VmHWM), in MiB, as last read from /proc while it ran. */
  peakMiB: number;
  /** Killed by the hang guard. */
  hung: boolean;
}

const children = new Set<ChildProcess>();

/** Runs the built CLI, killing it at the hang guard, and follows its peak RSS through /proc. */
function runBounded(args: string[], env: Record<string, string>): Promise<Bounded> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    let peakKiB = 0;
    let hung = false;
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const sample = () => {
      try {
        const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8');
        const hwm = /VmHWM:\s+(\d+) kB/.exec(status);
        if (hwm) peakKiB = Math.max(peakKiB, Number(hwm[1]));
      } catch {
        // ended
      }
    };
    const sampler = setInterval(sample, 20);
    const guard = setTimeout(() => {
      hung = true;
      child.kill('SIGKILL');
    }, GUARD_MS);
    child.on('error', reject);
    child.on('exit', () => sample());
    child.on('close', (code) => {
      clearInterval(sampler);
      clearTimeout(guard);
      children.delete(child);
      resolve({ code, stdout, stderr, peakMiB: Math.round(peakKiB / 1024), hung });
    });
  });
}

/** A loopback HTTP server with `handler`; its sockets are destroyed on close. */
async function loopback(handler: http.RequestListener): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer(handler);
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Headers at once, then one byte every second, never an end: a stalled server or proxy. */
const trickle: http.RequestListener = (request, response) => {
  request.resume();
  response.writeHead(200, { 'content-type': 'application/json' });
  response.write('{');
  const timer = setInterval(() => response.write(' '), 1000);
  response.on('close', () => clearInterval(timer));
};

const ONE_MIB = 1024 * 1024;

/** A JSON answer to GET /api/backups of 1 GiB, streamed with backpressure (never held by this server). */
const hugeJson: http.RequestListener = (request, response) => {
  request.resume();
  if (request.url !== '/api/backups') {
    response.writeHead(404, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ error: 'no', code: 'not_found', message: 'no', resolution: '' }));
    return;
  }
  const record = JSON.stringify({ id: '0'.repeat(36), status: 'READY', createdAt: new Date().toISOString() }) + ',';
  const chunk = Buffer.from(record.repeat(Math.floor(ONE_MIB / record.length)));
  response.writeHead(200, { 'content-type': 'application/json' });
  response.write('{"backups":[');
  let sent = 0;
  const pump = () => {
    while (sent < 1024 * ONE_MIB && !response.destroyed) {
      sent += chunk.length;
      if (!response.write(chunk)) return void response.once('drain', pump);
    }
    if (!response.destroyed) response.end('{}]}');
  };
  pump();
};

const KEY = `cfk_${'a'.repeat(43)}`;

let work: string;
const closers: (() => Promise<void>)[] = [];

beforeAll(() => {
  assertBuilt();
  work = tempDir('coffer-transport-');
});

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(closers.map((close) => close()));
});

async function serve(handler: http.RequestListener): Promise<string> {
  const server = await loopback(handler);
  closers.push(server.close);
  return server.url;
}

describe('every API request has a deadline and a size cap', () => {
  it('a server that sends its headers and then a byte a second: `coffer list` fails at COFFER_REQUEST_TIMEOUT, exit 1', async () => {
    const url = await serve(trickle);
    const result = await runBounded(['list'], { COFFER_URL: url, COFFER_API_KEY: KEY, COFFER_REQUEST_TIMEOUT: '3s' });
    expect(result.hung, 'the command never ended').toBe(false);
    expect(result.stderr).toContain(`coffer: the server at ${url} did not answer GET /api/backups within 3 s (COFFER_REQUEST_TIMEOUT)`);
    expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(result.code).toBe(1);
  }, 120_000);

  it('a 1 GiB JSON answer: `coffer list` stops reading at the cap, with bounded memory and a clear error', async () => {
    const url = await serve(hugeJson);
    const result = await runBounded(['list'], { COFFER_URL: url, COFFER_API_KEY: KEY });
    expect(result.hung, 'the command never ended').toBe(false);
    expect(result.stderr).toContain(`coffer: the server at ${url} sent more than 64 MiB in answer to GET /api/backups: stopped reading`);
    expect(result.code).toBe(1);
    // The old client held the whole answer as one string (2.1 GiB of RSS before it died); the cap is 64 MiB.
    expect(result.peakMiB).toBeGreaterThan(0);
    expect(result.peakMiB).toBeLessThan(400);
  }, 120_000);
});

describe('https:// against a plain-HTTP server', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    closers.push(() => server.stop());
  });

  it('says the server does not speak HTTPS and names the http:// address (no OpenSSL text), exit 1', async () => {
    const plain = new URL(server.url);
    const result = await runBounded(['list'], { COFFER_URL: `https://${plain.host}`, COFFER_API_KEY: KEY });
    expect(result.stderr).toBe(
      `coffer: the server at https://${plain.host} does not speak HTTPS (it answered in plain HTTP); if that is right, use http://${plain.host}\n`,
    );
    expect(result.code).toBe(1);
  }, 120_000);
});

describe('uploads and downloads fail when they stall', () => {
  let server: TestServer;
  let apiKey: string;
  let source: string;
  const passphrase = 'stall passphrase';
  // Each test makes a backup: the clock moves past the plan's cadence before each.
  const clock = new ManualClock();
  beforeEach(() => clock.advance(31 * 60_000));
  beforeAll(async () => {
    server = await startTestServer({ clock });
    closers.push(() => server.stop());
    ({ apiKey } = await server.newKey({ plan: 'pro' }));
    const init = await cliFor(server.url, apiKey, passphrase)(['init']);
    expect(init.code, init.stderr).toBe(0);
    source = path.join(work, 'stall-source');
    fs.mkdirSync(source);
    fs.writeFileSync(path.join(source, 'random.bin'), randomBytes(6 * ONE_MIB));
  });

  /** More than loopback's socket buffers can take in: the upload itself must wait on the connection. */
  const bigSource = () => {
    const big = path.join(work, 'stall-big');
    fs.mkdirSync(big);
    for (let i = 0; i < 6; i++) fs.writeFileSync(path.join(big, `random-${i}.bin`), randomBytes(8 * ONE_MIB));
    return big;
  };

  it('an upload the other side stops taking fails at COFFER_STALL_WINDOW, and its slot is freed', async () => {
    const proxy = await stallingProxy(Number(new URL(server.url).port), { upload: 2 * ONE_MIB });
    closers.push(proxy.close);
    const env = { COFFER_URL: proxy.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: passphrase, COFFER_STALL_WINDOW: '2s' };
    const result = await runBounded(['backup', bigSource()], env);
    expect(result.hung, 'the command never ended').toBe(false);
    expect(result.stderr).toContain(`coffer: the upload to ${proxy.url} stalled: less than 1024 bytes/s over 2 s (COFFER_STALL_WINDOW)`);
    expect(result.code).toBe(1);
    // The slot was deleted on the way out (straight at the server: the proxy is stuck).
    const listed = await cliFor(server.url, apiKey, passphrase)(['list', '--json']);
    expect(JSON.parse(listed.stdout).backups).toEqual([]);
  }, 120_000);

  it('a slow link that still moves (256 KiB/s, a 2 s window) is no stall: backup and restore succeed', async () => {
    const proxy = await stallingProxy(Number(new URL(server.url).port), { bytesPerSecond: 256 * 1024 });
    closers.push(proxy.close);
    const slow = path.join(work, 'slow-source');
    fs.mkdirSync(slow);
    fs.writeFileSync(path.join(slow, 'random.bin'), randomBytes(2 * ONE_MIB));
    const env = { COFFER_URL: proxy.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: passphrase, COFFER_STALL_WINDOW: '2s' };
    const made = await runBounded(['backup', slow, '--json'], { ...env, COFFER_KDF: 'min' });
    expect(made.code, made.stderr).toBe(0);
    const target = path.join(work, 'slow-restored');
    const restored = await runBounded(['restore', JSON.parse(made.stdout).id as string, target], env);
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stderr).not.toContain('resuming');
    expect(fs.readFileSync(path.join(target, 'random.bin')).equals(fs.readFileSync(path.join(slow, 'random.bin')))).toBe(true);
  }, 120_000);

  it('a download the other side stops sending is cut at COFFER_STALL_WINDOW and resumed (each connection carries 1 MiB)', async () => {
    const owner = cliFor(server.url, apiKey, passphrase);
    const made = await owner(['backup', source, '--json']);
    expect(made.code, made.stderr).toBe(0);
    const id = JSON.parse(made.stdout).id as string;
    // Each connection may carry 1 MiB to the client: the JSON answers fit, the 6 MiB archive does not.
    const proxy = await stallingProxy(Number(new URL(server.url).port), { download: ONE_MIB });
    closers.push(proxy.close);
    const target = path.join(work, 'restored');
    const env = { COFFER_URL: proxy.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: passphrase, COFFER_STALL_WINDOW: '2s' };
    const result = await runBounded(['restore', id, target], env);
    expect(result.hung, 'the command never ended').toBe(false);
    expect(result.stderr).toContain('connection lost; resuming at byte');
    expect(result.code, result.stderr).toBe(0);
    expect(fs.readFileSync(path.join(target, 'random.bin')).equals(fs.readFileSync(path.join(source, 'random.bin')))).toBe(true);
  }, 120_000);
});

describe('`coffer run` has an overall deadline', () => {
  it('a stalled server: the run fails as a network failure at COFFER_RUN_TIMEOUT; onFailure and the failure notification run', async () => {
    const url = await serve(trickle);
    const received: { path: string; body: Record<string, unknown> }[] = [];
    const receiver = await serve((request, response) => {
      let body = '';
      request.setEncoding('utf8').on('data', (d: string) => (body += d));
      request.on('end', () => {
        received.push({ path: request.url ?? '', body: JSON.parse(body) as Record<string, unknown> });
        response.end('ok');
      });
    });
    const home = path.join(work, 'run-home');
    const config = path.join(home, 'config', 'coffer');
    fs.mkdirSync(config, { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(config, 'web.key'), `${KEY}\n`, { mode: 0o600 });
    const hookFile = path.join(home, 'on-failure.txt');
    const profile = {
      url,
      apiKey: { file: 'web.key' },
      paths: [work],
      hooks: { onFailure: `echo "$COFFER_OUTCOME" > '${hookFile}'` },
      notify: { healthchecks: `${receiver}/hc`, failure: [`${receiver}/failure`] },
    };
    fs.writeFileSync(path.join(config, 'config.json'), JSON.stringify({ version: 1, default: 'web', profiles: { web: profile } }), {
      mode: 0o600,
    });
    const env = {
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, 'config'),
      XDG_STATE_HOME: path.join(home, 'state'),
      COFFER_PASSPHRASE: 'unused',
      // The request's own deadline is far off: the run's ends it.
      COFFER_REQUEST_TIMEOUT: '10m',
      COFFER_RUN_TIMEOUT: '3s',
    };
    const result = await runBounded(['run'], env);
    expect(result.hung, 'the run never ended').toBe(false);
    expect(result.stderr).toContain('coffer: the run of profile web did not finish within 3 s and was stopped');
    expect(result.code).toBe(1);
    expect(fs.readFileSync(hookFile, 'utf8')).toBe('failure\n');
    const failures = received.filter((r) => r.body.event === 'failure');
    expect(failures.map((r) => r.path).sort()).toEqual(['/failure', '/hc/fail']);
    expect(failures[0]!.body).toMatchObject({ profile: 'web', failure: 'network', exitCode: 1 });
    const state = JSON.parse(fs.readFileSync(path.join(home, 'state', 'coffer', 'runs', 'web.json'), 'utf8')) as { lastOutcome: string };
    expect(state.lastOutcome).toBe('failure');
  }, 120_000);
});
