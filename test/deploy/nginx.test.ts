/**
 * docs/deploy.md#behind-a-reverse-proxy, tested: Debian's nginx, as an unprivileged foreground process with its own
 * prefix in a temp dir, runs deploy/nginx.conf (the file the doc shows verbatim; only the listen address, the
 * upstream address and the certificate paths are substituted) with TLS in front of a real Coffer server.
 * Skipped when nginx is not installed, unless COFFER_REQUIRE_PG=1 (.ci/run installs it): then it fails.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createParser } from 'eventsource-parser';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { envelope, finalizeBody } from '../helpers/api.js';
import { bytes } from '../helpers/fixture.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { isRoot, lacking } from '../helpers/required.js';
import { S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOC_CONF = fs.readFileSync(path.join(ROOT, 'deploy/nginx.conf'), 'utf8');
const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((file) => fs.existsSync(file));

const MiB = 1024 * 1024;

it('docs/deploy.md shows deploy/nginx.conf verbatim', () => {
  const doc = fs.readFileSync(path.join(ROOT, 'docs/deploy.md'), 'utf8');
  expect(doc).toContain('```nginx\n' + DOC_CONF + '```\n');
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** nginx could not bind a port that was free a moment before (another process took it): start again on others. */
class PortTaken extends Error {}

/**
 * Runs `start` on `count` free ports, again on fresh ones (up to 5 times) when one was taken between the check and
 * nginx's bind; `start` stops what it started before it throws.
 */
async function onFreePorts<T>(count: number, start: (ports: number[]) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const ports: number[] = [];
    while (ports.length < count) {
      const port = await freePort();
      if (!ports.includes(port)) ports.push(port);
    }
    try {
      return await start(ports);
    } catch (error) {
      if (!(error instanceof PortTaken) || attempt === 5) throw error;
    }
  }
}

/** The documented configuration with only what differs on this machine substituted; each substitution must apply. */
function renderConf(options: { listenPort: number; upstream: string; certDir: string }): string {
  const substitutions: [string, string][] = [
    ['listen 443 ssl http2;', `listen 127.0.0.1:${options.listenPort} ssl http2;`],
    ['server 127.0.0.1:8080;', `server ${options.upstream};`],
    ['/etc/letsencrypt/live/backup.example.com/fullchain.pem', path.join(options.certDir, 'fullchain.pem')],
    ['/etc/letsencrypt/live/backup.example.com/privkey.pem', path.join(options.certDir, 'privkey.pem')],
  ];
  let conf = DOC_CONF;
  for (const [from, to] of substitutions) {
    expect(conf, `deploy/nginx.conf contains ${from}`).toContain(from);
    conf = conf.replace(from, to);
  }
  return conf;
}

interface Nginx {
  /** A request through nginx's site on `port` over TLS (optionally from another loopback address). */
  request(port: number, method: string, urlPath: string, options?: RequestOptions): Promise<Reply>;
  /** An event stream through nginx's site on `port`. */
  stream(port: number, urlPath: string, headers: Record<string, string>): EventStreamClient;
  stop(): Promise<void>;
}

interface RequestOptions {
  headers?: Record<string, string>;
  body?: Buffer;
  from?: string;
}

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

interface EventStreamClient {
  /** Frames received so far, in order. */
  frames: { event: string; data: any }[];
  /** Bytes of the response body received so far. */
  received(): number;
  /** Resolves once a frame matches; rejects when the response ends first. */
  until(predicate: (frame: { event: string; data: any }) => boolean): Promise<void>;
  ended: Promise<void>;
  close(): void;
}

/** A directory for nginx's prefix, with a self-signed certificate for 127.0.0.1 in it. */
function nginxDir(): string {
  const dir = tempDir('coffer-nginx-');
  fs.chmodSync(dir, 0o755);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      path.join(dir, 'privkey.pem'),
      '-out',
      path.join(dir, 'fullchain.pem'),
    ],
    { stdio: 'ignore' },
  );
  return dir;
}

/**
 * Starts nginx in the foreground with the given sites (each listening on 127.0.0.1:<port>), as `nobody` when the
 * tests run as root; everything it writes stays in `dir`.
 */
async function startNginx(dir: string, confs: string[]): Promise<Nginx> {
  const ca = fs.readFileSync(path.join(dir, 'fullchain.pem'));
  const includes = confs.map((conf, i) => {
    const file = path.join(dir, `site-${i}.conf`);
    fs.writeFileSync(file, conf);
    return `  include ${file};`;
  });
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((name) => `  ${name}_temp_path ${path.join(dir, name)};`);
  const main = path.join(dir, 'nginx.conf');
  fs.writeFileSync(
    main,
    ['worker_processes 1;', 'events { worker_connections 256; }', 'http {', '  access_log off;', ...temp, ...includes, '}', ''].join('\n'),
  );
  const asRoot = isRoot;
  if (asRoot) execFileSync('chown', ['-R', '65534:65534', dir]);
  const errorLog = path.join(dir, 'error.log');
  const child: ChildProcess = spawn(
    NGINX!,
    ['-p', `${dir}/`, '-c', main, '-g', `daemon off; pid ${path.join(dir, 'nginx.pid')}; error_log ${errorLog} info;`],
    { stdio: ['ignore', 'ignore', 'pipe'], ...(asRoot ? { uid: 65534, gid: 65534 } : {}) },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const log = () => `${stderr}${fs.existsSync(errorLog) ? fs.readFileSync(errorLog, 'utf8') : ''}`;

  const ports = confs.map((conf) => Number(/listen 127\.0\.0\.1:(\d+) /.exec(conf)![1]));
  const request = (port: number, method: string, urlPath: string, options: RequestOptions = {}) =>
    new Promise<Reply>((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port, path: urlPath, method, headers: options.headers, ca, localAddress: options.from, agent: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(options.body);
    });
  const stream = (port: number, urlPath: string, headers: Record<string, string>): EventStreamClient => {
    const frames: { event: string; data: any }[] = [];
    let bytesIn = 0;
    const waiters = new Set<() => void>();
    let done = false;
    const parser = createParser({
      onEvent: (message) => {
        frames.push({ event: message.event ?? 'message', data: JSON.parse(message.data) });
        for (const wake of waiters) wake();
      },
    });
    let req: ReturnType<typeof https.request>;
    const ended = new Promise<void>((resolve, reject) => {
      req = https.request({ host: '127.0.0.1', port, path: urlPath, headers, ca, agent: false }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`event stream answered ${res.statusCode}`));
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          bytesIn += Buffer.byteLength(text);
          parser.feed(text);
        });
        res.on('end', () => {
          done = true;
          for (const wake of waiters) wake();
          resolve();
        });
      });
      req.on('error', (error) => {
        done = true;
        for (const wake of waiters) wake();
        reject(error);
      });
      req.end();
    });
    ended.catch(() => undefined);
    return {
      frames,
      received: () => bytesIn,
      ended,
      close: () => req.destroy(),
      until: (predicate) =>
        new Promise<void>((resolve, reject) => {
          const check = () => {
            if (frames.some(predicate)) {
              waiters.delete(check);
              resolve();
            } else if (done) {
              waiters.delete(check);
              reject(new Error(`the stream ended first; frames: ${JSON.stringify(frames)}`));
            }
          };
          waiters.add(check);
          check();
        }),
    };
  };

  // Ready once it answers through to Coffer.
  for (let attempt = 0; ; attempt++) {
    try {
      const replies = await Promise.all(ports.map((port) => request(port, 'GET', '/healthz')));
      if (replies.every((reply) => reply.status === 200)) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || attempt > 100) {
      child.kill('SIGTERM');
      await exited;
      if (/Address already in use/.test(log())) throw new PortTaken(log());
      throw new Error(`nginx did not start:\n${log()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    request,
    stream,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** Uploads `data` into the slot `id` through nginx and finalizes it (201, then 200). */
async function uploadAndFinalize(
  request: (method: string, urlPath: string, options?: RequestOptions) => Promise<Reply>,
  auth: Record<string, string>,
  id: string,
  data: Buffer,
): Promise<void> {
  const uploaded = await request('POST', `/api/backups/upload?backupId=${id}`, {
    headers: { ...auth, 'content-type': 'application/octet-stream' },
    body: data,
  });
  expect(uploaded.status, uploaded.body.toString()).toBe(201);
  const finalized = await request('POST', `/api/backups/${id}/finalize`, {
    headers: { ...auth, 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify(finalizeBody(data.length))),
  });
  expect(finalized.status).toBe(200);
}

describe.skipIf(lacking(NGINX !== undefined, 'nginx'))('Coffer behind nginx (deploy/nginx.conf)', () => {
  let server: TestServer;
  let nginx: Nginx;
  /** The documented site, and the buffering control. */
  let port: number;
  let controlPort: number;
  const request = (method: string, urlPath: string, options?: RequestOptions) => nginx.request(port, method, urlPath, options);
  const json = (value: unknown) => Buffer.from(JSON.stringify(value));

  /** A new account with a vault and an upload slot, through nginx. */
  async function newSlot(): Promise<{ auth: Record<string, string>; id: string }> {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const auth = { authorization: `Bearer ${apiKey}` };
    const headers = { ...auth, 'content-type': 'application/json' };
    expect((await request('POST', '/api/backup-account/bootstrap', { headers, body: json(envelope()) })).status).toBe(200);
    const created = await request('POST', '/api/backups', { headers: auth });
    expect(created.status).toBe(201);
    return { auth, id: JSON.parse(created.body.toString()).backupId as string };
  }

  beforeAll(async () => {
    if (!NGINX) throw new Error('nginx is not installed (the run requires it); apt-get install nginx-light');
    await onFreePorts(2, async (ports) => {
      [port, controlPort] = ports as [number, number];
      server = await startTestServer({
        env: {
          COFFER_PUBLIC_URL: `https://127.0.0.1:${port}`,
          // No periodic frame for an hour: a status frame that arrives was pushed, not flushed by a later frame.
          COFFER_SSE_INTERVAL: '1h',
          COFFER_SSE_TIMEOUT: '2h',
          COFFER_TRUST_PROXY: '127.0.0.1',
          COFFER_SIGNIN_ATTEMPTS: '2',
          COFFER_SIGNIN_WINDOW: '10m',
        },
      });
      const upstream = new URL(server.url).host;
      const certDir = nginxDir();
      const documented = renderConf({ listenPort: port, upstream, certDir });
      // The control: the same file with response buffering forced on for event streams (and Coffer's
      // X-Accel-Buffering: no ignored), to show that the stream check below can tell buffering apart.
      expect(documented).toContain('proxy_buffering off;');
      const buffered = renderConf({ listenPort: controlPort, upstream, certDir })
        .replace('upstream coffer {', 'upstream coffer_buffered {')
        .replaceAll('proxy_pass http://coffer;', 'proxy_pass http://coffer_buffered;')
        .replace('proxy_buffering off;', 'proxy_buffering on; proxy_ignore_headers X-Accel-Buffering;');
      try {
        nginx = await startNginx(certDir, [documented, buffered]);
      } catch (error) {
        await server.stop();
        throw error;
      }
    });
  });
  afterAll(async () => {
    await nginx?.stop();
    await server?.stop();
  });

  it('an event stream delivers each status change while it is open (no proxy buffering)', async () => {
    const { auth, id } = await newSlot();

    const stream = nginx.stream(port, `/api/backups/${id}/events`, auth);
    const control = nginx.stream(controlPort, `/api/backups/${id}/events`, auth);
    await stream.until((f) => f.data.status === 'PENDING_UPLOAD');

    const startedAt = Date.now();
    const uploaded = await request('POST', `/api/backups/upload?backupId=${id}`, {
      headers: { ...auth, 'content-type': 'application/octet-stream' },
      body: bytes(64),
    });
    expect(uploaded.status).toBe(201);
    // The interval is an hour and nothing ends the stream before the finalize below: only a frame that nginx
    // passed on at once can arrive here.
    await stream.until((f) => f.data.status === 'UPLOADED');
    const deliveredMs = Date.now() - startedAt;
    expect(server.streams.stats().open).toBe(2);
    // Through the buffering control, not a byte of the same stream has arrived yet.
    expect(control.received()).toBe(0);

    const finalized = await request('POST', `/api/backups/${id}/finalize`, {
      headers: { ...auth, 'content-type': 'application/json' },
      body: json(finalizeBody(64)),
    });
    expect(finalized.status).toBe(200);
    await Promise.all([stream.ended, control.ended]);
    const statuses = (frames: { event: string; data: any }[]) => frames.map((f) => `${f.event} ${f.data.status}`);
    const expected = ['backup.status PENDING_UPLOAD', 'backup.status UPLOADED', 'backup.status READY', 'backup.stream.closed READY'];
    expect(statuses(stream.frames)).toEqual(expected);
    // The control got the same frames, all at the end of the response.
    expect(statuses(control.frames)).toEqual(expected);
    console.info(`nginx: upload sent → UPLOADED frame received in ${deliveredMs} ms`);
  });

  it('a 50 MiB upload and a Range download pass through', async () => {
    const { auth, id } = await newSlot();
    const data = bytes(50 * MiB);
    await uploadAndFinalize(request, auth, id, data);

    const start = 30 * MiB + 17;
    const end = start + 2 * MiB;
    const range = await request('GET', `/api/backups/${id}/content`, { headers: { ...auth, range: `bytes=${start}-${end}` } });
    expect(range.status).toBe(206);
    expect(range.headers['content-range']).toBe(`bytes ${start}-${end}/${data.length}`);
    expect(range.body.equals(data.subarray(start, end + 1))).toBe(true);

    const whole = await request('GET', `/api/backups/${id}/content`, { headers: auth });
    expect(whole.status).toBe(200);
    expect(whole.body.equals(data)).toBe(true);
  });

  it('the console session cookie is __Host-coffer_session and Secure (https public URL), and responses carry HSTS', async () => {
    const { apiKey } = await server.newKey();
    const signedIn = await request('POST', '/console/api/session', {
      headers: { 'content-type': 'application/json' },
      body: json({ apiKey }),
      from: '127.0.0.4',
    });
    expect(signedIn.status).toBe(200);
    const cookie = [signedIn.headers['set-cookie']].flat()[0]!;
    expect(cookie).toMatch(/^__Host-coffer_session=/);
    expect(cookie.split('; ')).toContain('Secure');
    expect(cookie.split('; ')).toContain('Path=/');
    expect(signedIn.headers['strict-transport-security']).toBe('max-age=31536000');
  });

  it('with nginx trusted, each client address has its own sign-in limit, and a forged X-Forwarded-For does not help', async () => {
    const attempt = async (from: string, forged?: string) =>
      (
        await request('POST', '/console/api/session', {
          headers: { 'content-type': 'application/json', ...(forged ? { 'x-forwarded-for': forged } : {}) },
          body: Buffer.from('{}'),
          from,
        })
      ).status;
    // 127.0.0.2 forges a new address each time: nginx appends the one it saw, and only that one is believed.
    expect([
      await attempt('127.0.0.2', '203.0.113.1'),
      await attempt('127.0.0.2', '203.0.113.2'),
      await attempt('127.0.0.2', '203.0.113.3'),
    ]).toEqual([400, 400, 429]);
    // Another client behind the same nginx is counted on its own.
    expect([await attempt('127.0.0.3'), await attempt('127.0.0.3'), await attempt('127.0.0.3')]).toEqual([400, 400, 429]);
  });
});

describe.skipIf(lacking(NGINX !== undefined, 'nginx'))('Coffer behind nginx with COFFER_ACCEL_REDIRECT (nginx sends the downloads)', () => {
  let server: TestServer;
  let nginx: Nginx;
  let port: number;
  const request = (method: string, urlPath: string, options?: RequestOptions) => nginx.request(port, method, urlPath, options);
  const json = (value: unknown) => Buffer.from(JSON.stringify(value));
  const data = bytes(8 * MiB + 123);
  let auth: Record<string, string>;
  let id: string;

  let dataDir: string;
  beforeAll(async () => {
    if (!NGINX) throw new Error('nginx is not installed (the run requires it); apt-get install nginx-light');
    await onFreePorts(1, async (ports) => {
      port = ports[0]!;
      // nginx's worker (nobody, when the tests run as root) reads the blobs: the data dir is readable, as the doc says.
      dataDir = tempDir('coffer-accel-');
      fs.chmodSync(dataDir, 0o755);
      // nginx connects from 127.0.0.1, the trusted proxy: only its requests are answered with an X-Accel-Redirect.
      server = await startTestServer({
        dataDir,
        env: { COFFER_PUBLIC_URL: `https://127.0.0.1:${port}`, COFFER_ACCEL_REDIRECT: '/_coffer_blobs', COFFER_TRUST_PROXY: '127.0.0.1' },
      });
      const certDir = nginxDir();
      // The documented file with its commented accel location turned on and pointed at this server's blobs.
      const block = /^ {2}#location \/_coffer_blobs\/ \{\n(?: {2}#.*\n)*? {2}#\}\n/m;
      const rendered = renderConf({ listenPort: port, upstream: new URL(server.url).host, certDir });
      expect(rendered).toMatch(block);
      const conf = rendered
        .replace(block, (text) => text.replace(/^ {2}#/gm, '  '))
        .replace('alias /var/lib/coffer/blobs/;', `alias ${path.join(dataDir, 'blobs')}/;`);
      expect(conf).toContain(`alias ${path.join(dataDir, 'blobs')}/;`);
      try {
        nginx = await startNginx(certDir, [conf]);
      } catch (error) {
        await server.stop();
        throw error;
      }
    });

    const { apiKey } = await server.newKey({ plan: 'pro' });
    auth = { authorization: `Bearer ${apiKey}` };
    const bootstrapped = await request('POST', '/api/backup-account/bootstrap', {
      headers: { ...auth, 'content-type': 'application/json' },
      body: json(envelope()),
    });
    expect(bootstrapped.status).toBe(200);
    const created = await request('POST', '/api/backups', { headers: auth });
    expect(created.status).toBe(201);
    id = JSON.parse(created.body.toString()).backupId as string;
    await uploadAndFinalize(request, auth, id, data);
    // The blob files are made by the server under its umask; the test's umask may be stricter than a deployment's.
    execFileSync('chmod', ['-R', 'a+rX', dataDir]);
  });
  afterAll(async () => {
    await nginx?.stop();
    await server?.stop();
  });

  const etag = () => `"${id}-${data.length}"`;
  const content = () => `/api/backups/${id}/content`;
  /** How often Coffer read the content itself (streamed it rather than redirect) while `run` ran. */
  const coffersOwnReads = async (run: () => Promise<void>): Promise<number> => {
    const spy = vi.spyOn(server.parts.backups, 'openContent');
    try {
      await run();
      return spy.mock.calls.length;
    } finally {
      spy.mockRestore();
    }
  };
  /** A GET straight to Coffer (not through nginx) from a chosen local address. */
  const directFrom = (from: string, urlPath: string, headers: Record<string, string>) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const sent = http.get(new URL(urlPath, server.url), { headers, localAddress: from, agent: false }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks) }));
        response.on('error', reject);
      });
      sent.on('error', reject);
    });

  it('Coffer itself answers the proxy’s address with an X-Accel-Redirect into the internal location and no body', async () => {
    const direct = await fetch(`${server.url}${content()}`, { headers: auth });
    expect(direct.status).toBe(200);
    expect(direct.headers.get('x-accel-redirect')).toMatch(new RegExp(`^/_coffer_blobs/backups/[0-9a-f-]+/${id}/[A-Za-z0-9._-]+$`));
    expect(direct.headers.get('etag')).toBe(etag());
    expect((await direct.arrayBuffer()).byteLength).toBe(0);
  });

  it('a client reaching Coffer directly, not through the proxy, gets the bytes from Coffer (no X-Accel-Redirect)', async () => {
    const reply = await directFrom('127.0.0.2', content(), { ...auth, 'x-forwarded-for': '127.0.0.1' });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-accel-redirect']).toBeUndefined();
    expect(reply.body.equals(data)).toBe(true);
  });

  it('a whole download through nginx is byte-exact, with Coffer’s headers, and nginx sent it (X-Accel-Redirect)', async () => {
    let whole!: Reply;
    expect(await coffersOwnReads(async () => void (whole = await request('GET', content(), { headers: auth })))).toBe(0);
    expect(whole.status).toBe(200);
    expect(whole.body.equals(data)).toBe(true);
    expect(whole.headers).toMatchObject({
      'content-type': 'application/octet-stream',
      'content-length': String(data.length),
      'content-disposition': `attachment; filename="backup-${id}.bin"`,
      etag: etag(),
      'cache-control': 'private, no-store',
      'accept-ranges': 'bytes',
    });
    expect(whole.headers['x-accel-redirect']).toBeUndefined();
    expect(whole.headers['last-modified']).toBeUndefined();
  });

  it('a Range download is byte-exact (also with a matching If-Range, and a suffix range)', async () => {
    const start = 5 * MiB + 17;
    const end = start + MiB;
    const ranges: Record<string, string>[] = [{ range: `bytes=${start}-${end}` }, { range: `bytes=${start}-${end}`, 'if-range': etag() }];
    for (const headers of ranges) {
      let part!: Reply;
      expect(await coffersOwnReads(async () => void (part = await request('GET', content(), { headers: { ...auth, ...headers } })))).toBe(
        0,
      );
      expect(part.status, JSON.stringify(headers)).toBe(206);
      expect(part.headers['content-range']).toBe(`bytes ${start}-${end}/${data.length}`);
      expect(part.headers.etag).toBe(etag());
      expect(part.body.equals(data.subarray(start, end + 1))).toBe(true);
    }
    const tail = await request('GET', content(), { headers: { ...auth, range: 'bytes=-1000' } });
    expect(tail.status).toBe(206);
    expect(tail.body.equals(data.subarray(data.length - 1000))).toBe(true);
  });

  it('a stale If-Range (another ETag, or a date) gives the whole body, as Coffer decides', async () => {
    // The date is the file's own modification time: nginx would honour it if it sent its Last-Modified.
    const redirect = (await fetch(`${server.url}${content()}`, { headers: auth })).headers.get('x-accel-redirect')!;
    const mtime = fs.statSync(path.join(server.dataDir, 'blobs', redirect.slice('/_coffer_blobs/'.length))).mtime;
    for (const ifRange of [`"${id}-1"`, `W/${etag()}`, mtime.toUTCString()]) {
      const reply = await request('GET', content(), { headers: { ...auth, range: 'bytes=0-99', 'if-range': ifRange } });
      expect(reply.status, ifRange).toBe(200);
      expect(reply.headers['content-range']).toBeUndefined();
      expect(reply.body.equals(data)).toBe(true);
    }
  });

  it('ranges nginx might read differently are served by Coffer as without the setting', async () => {
    // Unsatisfiable (nginx alone: 416), several ranges and a malformed one: Coffer sends the whole content.
    for (const range of [`bytes=${data.length}-`, 'bytes=0-9,20-29', 'bytes=0-9x', 'bytes=-0']) {
      const reply = await request('GET', content(), { headers: { ...auth, range } });
      expect(reply.status, range).toBe(200);
      expect(reply.body.equals(data)).toBe(true);
    }
    // Coffer did not redirect these: its own answer carries the bytes.
    const direct = await fetch(`${server.url}${content()}`, { headers: { ...auth, range: `bytes=${data.length}-` } });
    expect(direct.headers.get('x-accel-redirect')).toBeNull();
    expect(Buffer.from(await direct.arrayBuffer()).equals(data)).toBe(true);
  });

  it('without a valid key: 401 and no byte of the content', async () => {
    const unauthorized: Record<string, string>[] = [{}, { authorization: 'Bearer cfk_' + 'A'.repeat(43) }];
    for (const headers of unauthorized) {
      const reply = await request('GET', content(), { headers: { ...headers, range: 'bytes=0-99' } });
      expect(reply.status).toBe(401);
      expect(reply.headers['content-type']).toMatch(/^application\/json/);
      expect(reply.body.includes(data.subarray(0, 64))).toBe(false);
      expect(reply.body.length).toBeLessThan(1000);
    }
  });

  it('the internal location answers 404 to a request from outside, even for the right path', async () => {
    const redirect = (await fetch(`${server.url}${content()}`, { headers: auth })).headers.get('x-accel-redirect')!;
    for (const urlPath of [
      redirect,
      '/_coffer_blobs/',
      '/_coffer_blobs/../blobs/',
      `/_coffer_blobs%2F${redirect.slice('/_coffer_blobs/'.length)}`,
    ]) {
      const reply = await request('GET', urlPath, { headers: auth });
      expect(reply.status, urlPath).not.toBe(200);
      expect(reply.body.includes(data.subarray(0, 64))).toBe(false);
    }
    expect((await request('GET', redirect, { headers: auth })).status).toBe(404);
  });
});

/**
 * The S3 store behind nginx (docs/deploy.md#downloads-served-by-nginx): Coffer authorizes and decides, then redirects
 * to `/_coffer_s3/<ETag>/<bucket>/<key>?<query presigned for the store's own endpoint>`, and the documented location
 * proxies that to the gateway. The client sees exactly Coffer's own answer. On s3rver and on Ceph's RADOS Gateway.
 */
for (const engine of S3_ENGINES) {
  describe.skipIf(lacking(NGINX !== undefined, 'nginx') || skipEngine(engine))(
    `Coffer behind nginx with COFFER_ACCEL_REDIRECT and the S3 store (${engine}): nginx fetches the downloads from the store`,
    () => {
      let s3: TestS3;
      let server: TestServer;
      let nginx: Nginx;
      let port: number;
      const request = (method: string, urlPath: string, options?: RequestOptions) => nginx.request(port, method, urlPath, options);
      const data = bytes(6 * MiB + 321, 5);
      let auth: Record<string, string>;
      let id: string;
      const LIFETIME_MS = 2000;

      beforeAll(async () => {
        if (!NGINX) throw new Error('nginx is not installed (the run requires it); apt-get install nginx-light');
        s3 = await startS3(engine);
        await onFreePorts(1, async (ports) => {
          port = ports[0]!;
          server = await startTestServer({
            env: {
              ...s3.env,
              COFFER_PUBLIC_URL: `https://127.0.0.1:${port}`,
              COFFER_ACCEL_REDIRECT: '/_coffer_s3',
              COFFER_TRUST_PROXY: '127.0.0.1',
              COFFER_S3_URL_LIFETIME: `${LIFETIME_MS / 1000}s`,
              // Clients' presigned URLs name another address; nginx's redirect names the store's own.
              COFFER_S3_PRESIGNED: 'on',
              COFFER_S3_PUBLIC_ENDPOINT: 'http://s3.public.invalid',
            },
          });
          const certDir = nginxDir();
          // The documented file with its commented S3 locations turned on and pointed at this gateway.
          const block =
            /^ {2}#location ~ \^\/_coffer_s3\/.*\n(?: {2}#.*\n)*? {2}#\}\n {2}#location @coffer_s3_failed \{\n(?: {2}#.*\n)*? {2}#\}\n/m;
          const rendered = renderConf({ listenPort: port, upstream: new URL(server.url).host, certDir });
          expect(rendered).toMatch(block);
          const conf = rendered
            .replace(block, (text) => text.replace(/^ {2}#/gm, '  '))
            .replace('proxy_pass http://127.0.0.1:7480$coffer_object', `proxy_pass ${new URL(s3.endpoint).origin}$coffer_object`);
          expect(conf).toContain(`proxy_pass ${new URL(s3.endpoint).origin}$coffer_object`);
          try {
            nginx = await startNginx(certDir, [conf]);
          } catch (error) {
            await server.stop();
            throw error;
          }
        });
        const { apiKey } = await server.newKey({ plan: 'pro' });
        auth = { authorization: `Bearer ${apiKey}` };
        const bootstrapped = await request('POST', '/api/backup-account/bootstrap', {
          headers: { ...auth, 'content-type': 'application/json' },
          body: Buffer.from(JSON.stringify(envelope())),
        });
        expect(bootstrapped.status).toBe(200);
        const created = await request('POST', '/api/backups', { headers: auth });
        expect(created.status).toBe(201);
        id = JSON.parse(created.body.toString()).backupId as string;
        await uploadAndFinalize(request, auth, id, data);
      });
      afterAll(async () => {
        await nginx?.stop();
        await server?.stop();
        await s3?.close();
      });

      const etag = () => `"${id}-${data.length}"`;
      const content = () => `/api/backups/${id}/content`;
      const coffersOwnReads = async (run: () => Promise<void>): Promise<number> => {
        const spy = vi.spyOn(server.parts.backups, 'openContent');
        try {
          await run();
          return spy.mock.calls.length;
        } finally {
          spy.mockRestore();
        }
      };
      /** Coffer's own answer (a client reaching it directly, not through the proxy). */
      const coffersOwn = (headers: Record<string, string>) =>
        new Promise<Reply>((resolve, reject) => {
          const sent = http.get(
            new URL(content(), server.url),
            { headers: { ...auth, ...headers }, localAddress: '127.0.0.2', agent: false },
            (response) => {
              const chunks: Buffer[] = [];
              response.on('data', (chunk: Buffer) => chunks.push(chunk));
              response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks) }));
              response.on('error', reject);
            },
          );
          sent.on('error', reject);
        });
      /** The headers of an answer but the connection's, the date and the server's name (and Coffer's request id). */
      const specHeaders = (reply: Reply) => {
        const own = new Set(['date', 'server', 'connection', 'keep-alive', 'x-request-id']);
        return Object.fromEntries(Object.entries(reply.headers).filter(([name]) => !own.has(name)));
      };

      it('Coffer answers the proxy’s address with an X-Accel-Redirect to a presigned GET of the store and no body', async () => {
        const direct = await fetch(`${server.url}${content()}`, { headers: auth });
        expect(direct.status).toBe(200);
        const target = direct.headers.get('x-accel-redirect')!;
        expect(target).toMatch(
          new RegExp(
            `^/_coffer_s3/${id}-${data.length}/${s3.bucket}/backups/[0-9a-f-]+/${id}/[A-Za-z0-9._-]+\\?.*X-Amz-Signature=[0-9a-f]{64}`,
          ),
        );
        expect(direct.headers.get('etag')).toBe(etag());
        expect((await direct.arrayBuffer()).byteLength).toBe(0);
      });

      it('a whole download through nginx is byte-exact with exactly Coffer’s own headers, and Coffer read nothing', async () => {
        let whole!: Reply;
        expect(await coffersOwnReads(async () => void (whole = await request('GET', content(), { headers: auth })))).toBe(0);
        expect(whole.status).toBe(200);
        expect(whole.body.equals(data)).toBe(true);
        const own = await coffersOwn({});
        expect(own.body.equals(data)).toBe(true);
        expect(specHeaders(whole)).toEqual(specHeaders(own));
        expect(whole.headers).toMatchObject({
          'content-type': 'application/octet-stream',
          'content-length': String(data.length),
          'content-disposition': `attachment; filename="backup-${id}.bin"`,
          etag: etag(),
          'cache-control': 'private, no-store',
          'accept-ranges': 'bytes',
        });
      });

      it('a Range download is 206 and byte-exact, headers as Coffer’s own (also a matching If-Range, a suffix, an open end)', async () => {
        const start = 4 * MiB + 17;
        const end = start + MiB;
        for (const headers of [
          { range: `bytes=${start}-${end}` },
          { range: `bytes=${start}-${end}`, 'if-range': etag() },
          // s3rver reads a suffix range as 0-1000 (S3 and Ceph do not).
          ...(engine === 'ceph' ? [{ range: 'bytes=-1000' }] : []),
          { range: `bytes=${data.length - 10}-` },
          { range: `bytes=0-${data.length + 1000}` },
        ] as Record<string, string>[]) {
          let part!: Reply;
          expect(
            await coffersOwnReads(async () => void (part = await request('GET', content(), { headers: { ...auth, ...headers } }))),
          ).toBe(0);
          const own = await coffersOwn(headers);
          expect(part.status, JSON.stringify(headers)).toBe(206);
          expect(specHeaders(part), JSON.stringify(headers)).toEqual(specHeaders(own));
          expect(part.body.equals(own.body)).toBe(true);
        }
        const part = await request('GET', content(), { headers: { ...auth, range: `bytes=${start}-${end}` } });
        expect(part.headers['content-range']).toBe(`bytes ${start}-${end}/${data.length}`);
        expect(part.body.equals(data.subarray(start, end + 1))).toBe(true);
      });

      it('what the store would read differently (a stale If-Range, unsatisfiable, several or malformed ranges) Coffer sends itself: 200, the whole body', async () => {
        for (const headers of [
          { range: 'bytes=0-99', 'if-range': `"${id}-1"` },
          { range: 'bytes=0-99', 'if-range': new Date().toUTCString() },
          { range: `bytes=${data.length}-` },
          { range: 'bytes=0-9,20-29' },
          { range: 'bytes=0-9x' },
          { range: 'bytes=-0' },
        ] as Record<string, string>[]) {
          let reply!: Reply;
          expect(
            await coffersOwnReads(async () => void (reply = await request('GET', content(), { headers: { ...auth, ...headers } }))),
          ).toBe(1);
          expect(reply.status, JSON.stringify(headers)).toBe(200);
          expect(reply.body.equals(data)).toBe(true);
          expect(specHeaders(reply)).toEqual(specHeaders(await coffersOwn(headers)));
        }
      });

      it('another account’s backup: 404; no key: 401; no byte of the content either way', async () => {
        const { apiKey } = await server.newKey({ plan: 'pro' });
        const stranger = await request('GET', content(), { headers: { authorization: `Bearer ${apiKey}` } });
        expect(stranger.status).toBe(404);
        expect(JSON.parse(stranger.body.toString()).code).toBe('backup_not_found');
        const anonymous = await request('GET', content(), { headers: { range: 'bytes=0-99' } });
        expect(anonymous.status).toBe(401);
        for (const reply of [stranger, anonymous]) expect(reply.body.includes(data.subarray(0, 64))).toBe(false);
      });

      it('a READY backup whose object is gone from the store: the store’s 404 (Coffer does not ask the store first)', async () => {
        const created = await request('POST', '/api/backups', { headers: auth });
        // The cadence allows one backup per interval: a second account.
        const { apiKey } = await server.newKey({ plan: 'pro' });
        const other = { authorization: `Bearer ${apiKey}` };
        expect(
          (
            await request('POST', '/api/backup-account/bootstrap', {
              headers: { ...other, 'content-type': 'application/json' },
              body: Buffer.from(JSON.stringify(envelope())),
            })
          ).status,
        ).toBe(200);
        expect(created.status).toBe(429);
        const slot = JSON.parse((await request('POST', '/api/backups', { headers: other })).body.toString()).backupId as string;
        await uploadAndFinalize(request, other, slot, data.subarray(0, 1000));
        const { blobKey } = (await server.parts.stores.backups.getBackup(slot))!;
        await s3.store().delete(blobKey!);
        const gone = await request('GET', `/api/backups/${slot}/content`, { headers: other });
        expect(gone.status).toBe(404);
        expect(gone.headers.etag).toBeUndefined();
      });

      it('the internal location answers 404 from outside; the redirect’s URL stops working at the store once it expires', async () => {
        const target = (await fetch(`${server.url}${content()}`, { headers: auth })).headers.get('x-accel-redirect')!;
        const storeUrl = `${new URL(s3.endpoint).origin}${target.slice(target.indexOf('/', '/_coffer_s3/'.length))}`;
        // A real URL of the store, signed for its own endpoint (the Host nginx sends).
        const fresh = await fetch(storeUrl);
        expect(fresh.status).toBe(200);
        expect(Buffer.from(await fresh.arrayBuffer()).equals(data)).toBe(true);
        for (const urlPath of [target, '/_coffer_s3/', `/_coffer_s3%2F${target.slice('/_coffer_s3/'.length)}`]) {
          const reply = await request('GET', urlPath, { headers: auth });
          expect(reply.status, urlPath).not.toBe(200);
          expect(reply.body.includes(data.subarray(0, 64))).toBe(false);
        }
        expect((await request('GET', target, { headers: auth })).status).toBe(404);
        // S3 compares whole seconds: well past COFFER_S3_URL_LIFETIME.
        await new Promise((resolve) => setTimeout(resolve, LIFETIME_MS + 1500));
        const late = await fetch(storeUrl);
        expect(late.status).toBe(403);
        expect(Buffer.from(await late.arrayBuffer()).includes(data.subarray(0, 64))).toBe(false);
        // A download through nginx gets a fresh URL.
        const again = await request('GET', content(), { headers: { ...auth, range: 'bytes=0-99' } });
        expect(again.status).toBe(206);
        expect(again.body.equals(data.subarray(0, 100))).toBe(true);
      });
    },
  );
}
