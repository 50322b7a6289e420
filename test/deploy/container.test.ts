/**
 * The container image (Containerfile, docs/deploy.md#in-a-container), built and run with Podman as a self-hoster runs
 * it: the image is built from this checkout on the Node base that .ci/container-base makes (no registry is reachable
 * here, so not the official node image), started with its volume, and used from the host:
 * - the first start prints the API key once in the log; the server runs as the image's non-root user; the health check
 *   (/readyz) passes; a secret comes from a file (`*_FILE`);
 * - the CLI package the container serves (/downloads/coffer-cli.tgz), installed on the host, backs up and restores;
 * - `podman stop` (SIGTERM to the server, PID 1): an open event stream gets its closing frame, the log its shutdown
 *   line, the container exits 0;
 * - a new container on the same volume has the account and the backup (and prints no key);
 * - the image holds no npm, no compiler, no tests, no sources, no dev or optional dependencies, and keeps its size
 *   budget.
 * Host-specific Podman settings (runc, ulimits this machine's root can grant) go in a CONTAINERS_CONF file written
 * here, never in the image or the docs. Everything made here (image, containers, volume, files) is removed in
 * afterAll, also when a test fails. The base image is made beforehand (.ci/run exports COFFER_CONTAINER_BASE); without
 * Podman or that base the file is skipped on a developer's machine and fails in CI (test/helpers/required.ts).
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, snapshot } from '../client/helpers.js';
import { startLocalRegistry } from '../helpers/npm-registry.js';
import { lacking } from '../helpers/required.js';
import { tempDir } from '../helpers/tmp.js';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The image's size budget (`podman image inspect` Size, uncompressed): 283 MB on CI's base on 2026-11-28, of which the base 218 MB (docs/deploy.md#in-a-container). */
const SIZE_BUDGET_MB = 350;
const BASE = process.env.COFFER_CONTAINER_BASE ?? '';
const PODMAN = spawnSync('podman', ['--version'], { encoding: 'utf8' }).status === 0;
const HAVE_BASE = PODMAN && BASE !== '' && spawnSync('podman', ['image', 'exists', BASE]).status === 0;

/** Names of everything this file makes in Podman's storage, unique per run. */
const tag = `${process.pid}-${randomBytes(3).toString('hex')}`;
const IMAGE = `localhost/coffer-test:${tag}`;
const VOLUME = `coffer-test-data-${tag}`;
const containers: string[] = [];
let work = '';
let conf = '';
let imageMounted = false;

/** This host's settings, and a temp folder of this file's own for what podman build writes there. */
function podmanEnv(): NodeJS.ProcessEnv {
  return { ...process.env, CONTAINERS_CONF: conf, TMPDIR: path.join(work, 'tmp') };
}

/** podman with this host's settings (CONTAINERS_CONF), its output, and a clear error with stderr when it fails. */
async function podman(args: string[], timeout = 120_000): Promise<string> {
  try {
    const { stdout } = await run('podman', args, {
      env: podmanEnv(),
      timeout,
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout.trim();
  } catch (error) {
    const failed = error as Error & { stderr?: string; stdout?: string };
    throw new Error(`podman ${args.join(' ')} failed: ${failed.message}\n${failed.stderr ?? ''}`);
  }
}

/** Everything the container printed (the plain-text notices are on stderr, the JSON log lines on stdout). */
async function logs(name: string): Promise<string> {
  const { stdout, stderr } = await run('podman', ['logs', name], { env: podmanEnv() });
  return `${stdout}${stderr}`;
}

interface Started {
  name: string;
  url: string;
}

/** A container of the image on the volume, its port published on loopback; resolves once /readyz answers 200. */
async function startContainer(): Promise<Started> {
  const name = `coffer-test-${tag}-${containers.length + 1}`;
  containers.push(name);
  const secrets = path.join(work, 'secrets');
  const args = ['run', '--detach', '--name', name, '--publish', '127.0.0.1::8080', '--volume', `${VOLUME}:/data`];
  args.push('--volume', `${secrets}:/run/secrets:ro`, '--env', 'COFFER_METRICS_TOKEN_FILE=/run/secrets/metrics-token');
  await podman([...args, IMAGE]);
  const port = (await podman(['port', name, '8080/tcp'])).split(':').pop();
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ready = await fetch(`${url}/readyz`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ready) return { name, url };
    const state = await podman(['inspect', '--format', '{{.State.Status}}', name]);
    if (state !== 'running' || Date.now() > deadline) throw new Error(`container ${name} is ${state}, not ready:\n${await logs(name)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** An event stream read over plain HTTP: every frame until the server ends the response. */
function eventStream(url: string, apiKey: string, backupId: string) {
  const frames: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => frames.push(message) });
  let first: () => void = () => {};
  const opened = new Promise<void>((resolve) => (first = resolve));
  const ended = new Promise<void>((resolve, reject) => {
    const request = http.get(`${url}/api/backups/${backupId}/events`, { headers: { authorization: `Bearer ${apiKey}` } });
    request.on('error', reject);
    request.on('response', (response) => {
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        parser.feed(chunk);
        if (frames.length > 0) first();
      });
      response.on('end', () => resolve());
      response.on('error', reject);
    });
  });
  return { frames, opened, ended };
}

// Without Podman, or without a base image (`export COFFER_CONTAINER_BASE=$(.ci/container-base)` makes one).
describe.skipIf(lacking(HAVE_BASE, 'podman'))('the container image (Containerfile) under Podman', () => {
  let apiKey = '';
  let backupId = '';
  let first: Started;
  let coffer = '';
  let cliEnv: Record<string, string> = {};

  beforeAll(async () => {
    if (!PODMAN) throw new Error('podman is missing (CI installs it: .ci/run)');
    if (!HAVE_BASE)
      throw new Error(`no base image ${BASE || '(COFFER_CONTAINER_BASE is unset)'}: .ci/run makes it with .ci/container-base`);
    work = tempDir('coffer-container-');
    // This machine's runtime settings, for this file's podman commands only: crun refuses the host's hybrid cgroup
    // layout (runc does not), and root here cannot grant the default open-file and process limits.
    conf = path.join(work, 'containers.conf');
    fs.writeFileSync(conf, '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]\n\n[engine]\nruntime = "runc"\n');
    fs.mkdirSync(path.join(work, 'tmp'));
    fs.mkdirSync(path.join(work, 'secrets'));
    fs.writeFileSync(path.join(work, 'secrets', 'metrics-token'), 'metrics-token-from-a-file\n', { mode: 0o444 });
    // --layers=false: no intermediate images are kept, so removing the tagged image removes all the build made.
    const build = ['build', '--format', 'docker', '--layers=false', '--build-arg', `NODE_IMAGE=${BASE}`, '--tag', IMAGE];
    await podman([...build, '--file', 'Containerfile', ROOT], 900_000);
    await podman(['volume', 'create', VOLUME]);
  }, 960_000);

  afterAll(async () => {
    if (!conf) return;
    const quietly = (args: string[]) => podman(args).catch((error: Error) => console.warn(error.message));
    if (imageMounted) await quietly(['image', 'unmount', IMAGE]);
    for (const name of containers) await quietly(['rm', '--force', '--time', '0', '--ignore', name]);
    await quietly(['volume', 'rm', '--force', VOLUME]);
    await quietly(['image', 'rm', '--force', '--ignore', IMAGE]);
  }, 120_000);

  it('holds no npm, build tools, tests, sources, dev or optional dependencies, and keeps its size budget', async () => {
    const root = await podman(['image', 'mount', IMAGE]);
    imageMounted = true;
    const exists = (file: string) => fs.existsSync(path.join(root, file));
    expect(exists('app/dist/cli/main.js')).toBe(true);
    expect(exists('app/dist/downloads/coffer-cli.tgz')).toBe(true);
    expect(exists('app/dist/console-ui/index.html')).toBe(true);
    expect(exists('app/src/discovery/content/product.json')).toBe(true);
    expect(fs.readdirSync(path.join(root, 'app')).sort()).toEqual(['dist', 'node_modules', 'package.json', 'src']);
    expect(fs.readdirSync(path.join(root, 'app/src'))).toEqual(['discovery']);
    for (const tool of ['npm', 'npx', 'corepack', 'yarn', 'gcc', 'cc', 'make', 'python3', 'git']) {
      const found = ['usr/local/bin', 'usr/bin', 'bin'].filter((dir) => exists(`${dir}/${tool}`));
      expect(found, tool).toEqual([]);
    }
    // Every package of the lockfile that only development or the optional SQLite driver needs is absent; every
    // other one is present.
    const lock = JSON.parse(await fsp.readFile(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; optional?: boolean; devOptional?: boolean; os?: string[]; cpu?: string[] }>;
    };
    const installed = Object.entries(lock.packages).filter(([where]) => where.startsWith('node_modules/'));
    const notForRuntime = installed.filter(([, entry]) => entry.dev || entry.optional || entry.devOptional);
    const runtime = installed.filter(([, entry]) => !(entry.dev || entry.optional || entry.devOptional));
    expect(notForRuntime.map(([where]) => where).filter((where) => exists(`app/${where}`))).toEqual([]);
    expect(runtime.map(([where]) => where).filter((where) => !exists(`app/${where}/package.json`))).toEqual([]);
    expect(notForRuntime.map(([where]) => where)).toContain('node_modules/vitest');
    expect(notForRuntime.map(([where]) => where)).toContain('node_modules/better-sqlite3');

    const size = Number(await podman(['image', 'inspect', '--format', '{{.Size}}', IMAGE]));
    console.info(`container image: ${(size / 1e6).toFixed(0)} MB (budget ${SIZE_BUDGET_MB} MB)`);
    expect(size).toBeLessThanOrEqual(SIZE_BUDGET_MB * 1e6);
    await podman(['image', 'unmount', IMAGE]);
    imageMounted = false;

    const [image] = JSON.parse(await podman(['image', 'inspect', IMAGE])) as {
      Config: { User: string; Volumes: Record<string, unknown>; StopSignal: string };
      Healthcheck?: { Test: string[] };
    }[];
    expect(image!.Config).toMatchObject({ User: '10001:10001', StopSignal: 'SIGTERM' });
    expect(Object.keys(image!.Config.Volumes)).toEqual(['/data']);
    expect(image!.Healthcheck?.Test.join(' ')).toContain('/readyz');
  });

  it('first start: prints the API key once, runs as a non-root user, is healthy, reads a secret from a file', async () => {
    first = await startContainer();
    const printed = await logs(first.name);
    const keys = [...printed.matchAll(/API key \(shown once, store it now\): (\S+)/g)].map((match) => match[1]!);
    expect(keys).toHaveLength(1);
    apiKey = keys[0]!;
    expect((await fetch(`${first.url}/api/backups`, { headers: { authorization: `Bearer ${apiKey}` } })).status).toBe(200);

    // The server (PID 1) and a process started beside it run as the image's user, not root.
    expect(await podman(['exec', first.name, 'id', '-u'])).toBe('10001');
    const status = await podman(['exec', first.name, 'cat', '/proc/1/status']);
    expect(status).toMatch(/^Uid:\t10001\t10001\t10001\t10001$/m);
    expect(await podman(['exec', first.name, 'cat', '/proc/1/cmdline'])).toContain('/app/dist/cli/main.js');

    // The image's health check, as the engine runs it.
    await podman(['healthcheck', 'run', first.name]);

    // COFFER_METRICS_TOKEN_FILE: the token is the file's (its newline dropped).
    const metrics = (token: string) => fetch(`${first.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect((await metrics('metrics-token-from-a-file')).status).toBe(200);
    expect((await metrics('metrics-token-from-a-fil')).status).toBe(401);
  }, 120_000);

  it('the CLI package the container serves, installed on the host, backs up and restores through it', async () => {
    const tarball = `${first.url}/downloads/coffer-cli.tgz`;
    const response = await fetch(tarball);
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    const prefix = path.join(work, 'prefix');
    const names = Object.keys(
      (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies,
    );
    const registry = await startLocalRegistry(ROOT, names);
    try {
      fs.writeFileSync(path.join(work, 'npmrc'), '');
      await run('npm', ['install', '-g', tarball, '--prefix', prefix, '--no-audit', '--no-fund'], {
        env: {
          ...process.env,
          npm_config_registry: `${registry.url}/`,
          npm_config_userconfig: path.join(work, 'npmrc'),
          npm_config_cache: path.join(work, 'npm-cache'),
          npm_config_update_notifier: 'false',
          // Anything not on loopback would go through this proxy, which is not there: no network needed.
          npm_config_proxy: 'http://127.0.0.1:9',
          npm_config_https_proxy: 'http://127.0.0.1:9',
          npm_config_noproxy: '127.0.0.1',
        },
        timeout: 120_000,
      });
    } finally {
      await registry.close();
    }
    coffer = path.join(prefix, 'bin', 'coffer');
    cliEnv = baseEnv({ COFFER_URL: first.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: 'in a container', COFFER_KDF: 'min' });
    const source = path.join(work, 'source');
    await fsp.mkdir(path.join(source, 'sub'), { recursive: true });
    await fsp.writeFile(path.join(source, 'a.txt'), 'alpha\n');
    await fsp.writeFile(path.join(source, 'sub', 'b.bin'), randomBytes(300_000));
    await run(coffer, ['init'], { env: cliEnv });
    const backup = JSON.parse((await run(coffer, ['backup', source, '--json'], { env: cliEnv })).stdout) as { id: string; status: string };
    expect(backup.status).toBe('READY');
    backupId = backup.id;
    const target = path.join(work, 'restored');
    await run(coffer, ['restore', backupId, target], { env: cliEnv });
    expect(await snapshot(target)).toEqual(await snapshot(source));
  }, 240_000);

  it('podman stop: an in-flight upload finishes, an open event stream gets its closing frame, the exit code is 0', async () => {
    // Two more accounts, made with the admin CLI inside the container (each account has one upload slot at a time).
    const account = async () => {
      const made = JSON.parse(
        await podman(['exec', first.name, 'node', '/app/dist/cli/main.js', 'admin', 'keys', 'create', '--plan', 'pro', '--json']),
      ) as { apiKey: string };
      const auth = { authorization: `Bearer ${made.apiKey}` };
      const b64 = (n: number) => Buffer.alloc(n, 3).toString('base64');
      const bootstrap = await fetch(`${first.url}/api/backup-account/bootstrap`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({
          cryptoVersion: 'v1',
          kdf: { salt: b64(16), opslimit: 2, memlimit: 8192 },
          wrappedMasterKey: b64(48),
          wrappedMasterKeyNonce: b64(24),
        }),
      });
      expect(bootstrap.ok).toBe(true);
      const slot = await fetch(`${first.url}/api/backups`, { method: 'POST', headers: auth });
      expect(slot.status).toBe(201);
      return { apiKey: made.apiKey, backupId: ((await slot.json()) as { backupId: string }).backupId };
    };
    const watched = await account();
    const uploading = await account();

    // A new slot stays PENDING_UPLOAD, so its event stream stays open until the server ends it.
    const stream = eventStream(first.url, watched.apiKey, watched.backupId);
    await stream.opened;

    // An upload whose first half the server has written to the volume's tmp/ when the stop begins.
    const half = randomBytes(256 * 1024);
    const volume = await podman(['volume', 'inspect', '--format', '{{.Mountpoint}}', VOLUME]);
    let sendRest: () => void = () => {};
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.request(`${first.url}/api/backups/upload?backupId=${uploading.backupId}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${uploading.apiKey}`,
          'content-type': 'application/octet-stream',
          'content-length': String(half.length * 2),
        },
      });
      request.on('response', (response) => {
        let body = '';
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, body }));
      });
      request.on('error', reject);
      request.write(half);
      sendRest = () => request.end(half);
    });
    const received = () =>
      fs.readdirSync(path.join(volume, 'tmp')).some((name) => fs.statSync(path.join(volume, 'tmp', name)).size >= half.length);
    while (!received()) await new Promise((resolve) => setTimeout(resolve, 50));

    // The server's own 30 s grace bounds the stop here, not the engine's default of 10 s.
    let stopDone = false;
    const stopped = podman(['stop', '--time', '60', first.name], 90_000).finally(() => (stopDone = true));
    stopped.catch(() => {}); // awaited below; a failure is reported there
    const shutdownLine = 'SIGTERM: finishing in-flight requests and closing event streams';
    // Until the server says it is stopping (or the stop is over without a word: then the expectation below fails).
    while (!stopDone && !(await logs(first.name)).includes(shutdownLine)) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await logs(first.name)).toContain(shutdownLine);
    sendRest();
    const { status, body } = await answer;
    expect(status).toBe(201);
    expect((JSON.parse(body) as { size: number }).size).toBe(half.length * 2);
    await stream.ended;
    expect(stream.frames.at(-1)).toMatchObject({ event: 'backup.stream.closed' });
    expect(JSON.parse(stream.frames.at(-1)!.data)).toMatchObject({ reason: 'shutdown' });
    await stopped;
    expect(await podman(['inspect', '--format', '{{.State.ExitCode}}', first.name])).toBe('0');
  }, 120_000);

  it('a new container on the same volume has the account and the backup, and prints no key', async () => {
    const second = await startContainer();
    expect(await logs(second.name)).not.toContain('API key');
    const env = { ...cliEnv, COFFER_URL: second.url };
    const listed = JSON.parse((await run(coffer, ['list', '--json'], { env })).stdout) as { backups: { id: string; status: string }[] };
    expect(listed.backups.find((backup) => backup.id === backupId)).toMatchObject({ status: 'READY' });
    const target = path.join(work, 'restored-again');
    await run(coffer, ['restore', backupId, target], { env });
    expect(await snapshot(target)).toEqual(await snapshot(path.join(work, 'source')));
    // The volume's files belong to the image's user.
    const owners = await podman(['exec', second.name, 'find', '/data', '!', '-uid', '10001']);
    expect(owners).toBe('');
  }, 180_000);
});
