/**
 * Client test helpers: run the real built CLI (`node dist/cli/main.js`) as a process, build a test tree,
 * snapshot a tree for byte/mode/mtime comparison, search files for plaintext, and upload hand-made (hostile)
 * tar archives sealed exactly like the CLI seals them.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import fsp from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import * as tar from 'tar';
import { CHUNK_BYTES, EncryptStream, newKey, sealMetadata, wipe, wrapDek, type BackupMetadata } from '../../src/client/envelope.js';
import { CofferClient } from '../../src/client/sdk.js';
import { uploadDirect } from '../../src/client/sdk-node-upload.js';
import { ManualClock } from '../helpers/clock.js';
import { HOME_VARIABLES } from '../helpers/global-setup.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { endsWithTest } from '../helpers/children.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = path.join(ROOT, 'dist/cli/main.js');

import { assertBuilt } from '../helpers/built.js';

export { assertBuilt };

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** A clean environment: nothing COFFER_* leaks in from the outside. */
export function baseEnv(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    // The test file's own home and XDG base directories (test/helpers/setup.ts), never the developer's; a test
    // that gives its own HOME gets the XDG directories below it (unless it names them too).
    ...(extra.HOME === undefined
      ? Object.fromEntries(HOME_VARIABLES.flatMap((name) => (process.env[name] ? [[name, process.env[name]]] : [])))
      : {}),
    // The run's temp root (test/helpers/global-setup.ts), so what a CLI process leaves there is seen.
    ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
    // The module compile cache off (global-setup.ts): a cache the CLI would keep in that temp root, not test output.
    ...(process.env.NODE_DISABLE_COMPILE_CACHE ? { NODE_DISABLE_COMPILE_CACHE: process.env.NODE_DISABLE_COMPILE_CACHE } : {}),
    TZ: 'UTC',
    LANG: 'C.UTF-8',
  };
  for (const [key, value] of Object.entries(extra)) if (value !== undefined) env[key] = value;
  return env;
}

export function runCli(args: string[], env: Record<string, string | undefined>, options: { input?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: baseEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
    endsWithTest(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

/** A CLI bound to one server, key and passphrase (small Argon2 cost through COFFER_KDF=min). */
export function cliFor(url: string, apiKey: string, passphrase: string | undefined, extra: Record<string, string> = {}) {
  const env = { COFFER_URL: url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: passphrase, COFFER_KDF: 'min', ...extra };
  return (args: string[], more: Record<string, string | undefined> = {}) => runCli(args, { ...env, ...more });
}

export type Cli = ReturnType<typeof cliFor>;

/** A real server with one initialized vault, for the key-management tests (recipient, rekey, kit). */
export interface VaultFixture {
  server: TestServer;
  clock: ManualClock;
  apiKey: string;
  /** The SDK on the same key (reads what a kept copy or a hostile server would hold). */
  client: CofferClient;
  /** A temp directory for restores, holding `source`: makeTree's tree. */
  work: string;
  source: string;
  /** The CLI with the passphrase, and a host's CLI with none anywhere (stdin is a closed pipe: no prompt). */
  owner: Cli;
  host: Cli;
  /** Moves the clock past the pro plan's 30-minute cadence. */
  nextSlotAllowed(): void;
  /** `coffer backup source --json` with `cli` (and `env`), then the next slot allowed; the new id. */
  backup(cli: Cli, env?: Record<string, string>): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Starts a server (manual clock, a pro-plan key), builds the source tree and runs `coffer init` with `passphrase`.
 * Call in beforeAll, and `stop()` in afterAll (the server; its data directory and `work` are temp dirs).
 */
export async function startVault(prefix: string, passphrase: string): Promise<VaultFixture> {
  assertBuilt();
  const clock = new ManualClock();
  const server = await startTestServer({ clock });
  try {
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const work = tempDir(prefix);
    const source = path.join(work, 'source');
    await makeTree(source);
    const owner = cliFor(server.url, apiKey, passphrase);
    const host = cliFor(server.url, apiKey, undefined);
    const init = await owner(['init']);
    if (init.code !== 0) throw new Error(`coffer init failed (${init.code}): ${init.stderr}`);
    const nextSlotAllowed = () => clock.advance(31 * 60 * 1000);
    return {
      server,
      clock,
      apiKey,
      client: new CofferClient({ baseUrl: server.url, apiKey }),
      work,
      source,
      owner,
      host,
      nextSlotAllowed,
      async backup(cli, env = {}) {
        const detail = json(await cli(['backup', source, '--json'], env));
        nextSlotAllowed();
        return detail.id as string;
      },
      stop: () => server.stop(),
    };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

export function json<T = any>(result: RunResult): T {
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

// ---- trees ----

export const CANARY_NAME = 'zk-canary-name-5d1e0c.txt';
export const CANARY_TEXT = 'ZK-CANARY-CONTENT-8a7f3c91 the server must never see this line';

const at = (iso: string) => new Date(iso);

/**
 * A tree with nested folders, empty files and directories, unicode names, symlinks (one dangling), a hard link,
 * distinct modes and mtimes, and a random file of `bigBytes` (20 MiB for the round trip).
 */
export async function makeTree(root: string, bigBytes = 0): Promise<void> {
  const file = async (rel: string, content: string | Buffer, mode = 0o644, mtime = '2001-02-03T04:05:06Z') => {
    const full = path.join(root, rel);
    await fsp.mkdir(path.dirname(full), { recursive: true });
    await fsp.writeFile(full, content);
    await fsp.chmod(full, mode);
    await fsp.utimes(full, at(mtime), at(mtime));
  };
  await fsp.mkdir(root, { recursive: true });
  await file('top.txt', 'top level\n', 0o644, '2020-05-06T07:08:09Z');
  await file('nested/a/b/c/deep.txt', 'deep inside\n', 0o640, '2019-01-01T00:00:01Z');
  await file(`nested/a/${CANARY_NAME}`, `${CANARY_TEXT}\n`, 0o600, '2018-03-04T05:06:07Z');
  await file('empty.txt', '', 0o644, '2017-07-07T07:07:07Z');
  await file('nested/empty-too.bin', Buffer.alloc(0), 0o600, '2016-06-06T06:06:06Z');
  await file('ünïcødé/文件 📁.txt', 'unicode names ✓\n', 0o644, '2021-12-31T23:59:59Z');
  await file('Ω≈ç√ ∂ƒ.md', '# math\n', 0o644, '2022-02-22T22:22:22Z');
  await file('bin/run.sh', '#!/bin/sh\necho run\n', 0o755, '2015-05-05T05:05:05Z');
  await file('readonly.txt', 'read only\n', 0o444, '2014-04-04T04:04:04Z');
  if (bigBytes > 0) await file('big/random.bin', randomBytes(bigBytes), 0o644, '2023-03-03T03:03:03Z');
  await fsp.mkdir(path.join(root, 'empty-dir'), { recursive: true });
  await fsp.mkdir(path.join(root, 'nested/a/empty-sub'), { recursive: true });
  await fsp.mkdir(path.join(root, 'private'), { recursive: true });
  await file('private/key.txt', 'private\n', 0o600, '2013-03-03T03:03:03Z');
  await fsp.symlink('nested/a/b/c/deep.txt', path.join(root, 'link-to-deep'));
  await fsp.symlink('does/not/exist', path.join(root, 'dangling-link'));
  await fsp.symlink('../top.txt', path.join(root, 'nested/up-link'));
  await fsp.symlink('/nonexistent/absolute/target', path.join(root, 'abs-link')); // restored verbatim, never followed
  await fsp.symlink('../../outside-of-the-tree', path.join(root, 'nested/outside-link'));
  await fsp.link(path.join(root, 'top.txt'), path.join(root, 'nested/hard-link.txt'));
  // Directory modes and mtimes last (writing children changes a directory's mtime), deepest first.
  const dirs: [string, number, string][] = [
    ['nested/a/b/c', 0o755, '2012-01-01T00:00:00Z'],
    ['nested/a/b', 0o750, '2012-01-02T00:00:00Z'],
    ['nested/a/empty-sub', 0o700, '2012-01-03T00:00:00Z'],
    ['nested/a', 0o755, '2012-01-04T00:00:00Z'],
    ['nested', 0o755, '2012-01-05T00:00:00Z'],
    ['empty-dir', 0o755, '2012-01-06T00:00:00Z'],
    ['private', 0o700, '2012-01-07T00:00:00Z'],
    ['ünïcødé', 0o755, '2012-01-08T00:00:00Z'],
    ['bin', 0o755, '2012-01-09T00:00:00Z'],
  ];
  if (bigBytes > 0) dirs.push(['big', 0o755, '2012-01-10T00:00:00Z']);
  for (const [rel, mode, mtime] of dirs) {
    await fsp.chmod(path.join(root, rel), mode);
    await fsp.utimes(path.join(root, rel), at(mtime), at(mtime));
  }
}

export interface EntrySnapshot {
  type: 'file' | 'dir' | 'symlink' | 'other';
  mode: number;
  /** Whole seconds: tar (ustar) keeps mtimes to the second. Not compared for symlinks. */
  mtime?: number;
  size?: number;
  sha256?: string;
  target?: string;
}

/** Every entry below `root` (not root itself): type, mode, mtime, size, content hash, link target. */
export async function snapshot(root: string): Promise<Record<string, EntrySnapshot>> {
  const out: Record<string, EntrySnapshot> = {};
  const walk = async (dir: string, rel: string) => {
    for (const name of (await fsp.readdir(dir)).sort()) {
      const full = path.join(dir, name);
      const key = rel ? `${rel}/${name}` : name;
      const stat = await fsp.lstat(full);
      const mode = stat.mode & 0o7777;
      if (stat.isSymbolicLink()) out[key] = { type: 'symlink', mode: 0, target: await fsp.readlink(full) };
      else if (stat.isDirectory()) {
        out[key] = { type: 'dir', mode, mtime: Math.floor(stat.mtimeMs / 1000) };
        await walk(full, key);
      } else if (stat.isFile()) {
        const sha256 = createHash('sha256')
          .update(await fsp.readFile(full))
          .digest('hex');
        out[key] = { type: 'file', mode, mtime: Math.floor(stat.mtimeMs / 1000), size: stat.size, sha256 };
      } else out[key] = { type: 'other', mode };
    }
  };
  await walk(root, '');
  return out;
}

/** Everything observable about `dir`: its own mode and exact mtime, and every entry below it (but `skip`'s). */
export async function treeState(dir: string, skip: (key: string) => boolean = () => false) {
  const own = await fsp.lstat(dir);
  const entries = Object.entries(await snapshot(dir)).filter(([key]) => !skip(key));
  return { mode: own.mode & 0o7777, mtimeMs: own.mtimeMs, entries: Object.fromEntries(entries) };
}

/** Every file below `root`, read whole (for searching server data for plaintext). */
export async function readAllFiles(root: string): Promise<{ file: string; bytes: Buffer }[]> {
  const files: { file: string; bytes: Buffer }[] = [];
  const walk = async (dir: string) => {
    for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile()) files.push({ file: full, bytes: await fsp.readFile(full) });
    }
  };
  await walk(root);
  return files;
}

export const exists = (p: string) => fs.existsSync(p);

/**
 * Starts the CLI without waiting: `firstLine` resolves with its first stdout line, `done` with the result.
 * `command` runs it through another program (setpriv as nobody), `cli` is the script to run (default CLI).
 */
export function startCli(args: string[], env: Record<string, string | undefined>, options: { command?: string[]; cli?: string } = {}) {
  const [command, ...prefix] = options.command ?? [process.execPath];
  const child = spawn(command!, [...prefix, options.cli ?? CLI, ...args], { env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  endsWithTest(child);
  let stdout = '';
  let stderr = '';
  let firstLine: (line: string) => void = () => undefined;
  const first = new Promise<string>((resolve) => (firstLine = resolve));
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    if (stdout.includes('\n')) firstLine(stdout.slice(0, stdout.indexOf('\n')));
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const done = new Promise<RunResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
  /** Sends a signal (Ctrl-C by default). */
  const kill = (signal: NodeJS.Signals = 'SIGINT') => child.kill(signal);
  /** The result, or a failure after `ms` (the process is then killed): a bound against hangs, not a timing check. */
  const within = async (ms: number): Promise<RunResult> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`the CLI did not end within ${ms} ms; stderr: ${stderr}`));
      }, ms);
    });
    try {
      return await Promise.race([done, late]);
    } finally {
      clearTimeout(timer);
    }
  };
  return { firstLine: first, done, kill, within, pid: child.pid! };
}

// ---- the CLI for another user ----

let readableCopy: string | undefined;

/**
 * The client CLI as a user without access to the checkout can run it (setpriv as nobody: the checkout may live in a
 * private, 0700 directory): the built bundle (dist/cli/client-main.bundle.js), package.json and the packages it
 * loads from node_modules at run time (sodium-native and what that needs), copied once per test file into a
 * world-readable temp directory. Returns the bundle's path there.
 */
export function cliForAnyUser(): string {
  if (readableCopy) return readableCopy;
  const dir = tempDir('coffer-cli-copy-');
  fs.mkdirSync(path.join(dir, 'dist/cli'), { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'dist/cli/client-main.bundle.js'), path.join(dir, 'dist/cli/client-main.bundle.js'));
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  // The bundle leaves only native addons outside: their packages and their dependencies, as installed.
  const copied = new Set<string>();
  const copy = (name: string) => {
    if (copied.has(name)) return;
    copied.add(name);
    const from = path.join(ROOT, 'node_modules', name);
    fs.cpSync(from, path.join(dir, 'node_modules', name), { recursive: true });
    const manifest = JSON.parse(fs.readFileSync(path.join(from, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    for (const dependency of Object.keys(manifest.dependencies ?? {})) copy(dependency);
  };
  copy('sodium-native');
  fs.chmodSync(dir, 0o755); // in the run's temp root, itself traversable (test/helpers/global-setup.ts)
  readableCopy = path.join(dir, 'dist/cli/client-main.bundle.js');
  return readableCopy;
}

// ---- hand-made archives ----

export interface TarEntrySpec {
  path: string;
  type?: 'File' | 'SymbolicLink' | 'Directory' | 'Link';
  body?: string | Buffer;
  linkpath?: string;
  mode?: number;
  mtime?: Date;
}

/** One tar entry (ustar header, pax-free: names up to 100 bytes), body padded to 512 bytes. */
export function tarEntry(entry: TarEntrySpec): Buffer {
  const type = entry.type ?? 'File';
  const body = Buffer.from(type === 'File' ? (entry.body ?? '') : '');
  const header = Buffer.alloc(512);
  new tar.Header({
    path: entry.path,
    mode: entry.mode ?? (type === 'Directory' ? 0o755 : 0o644),
    size: body.length,
    mtime: entry.mtime ?? new Date('2026-01-01T00:00:00Z'),
    type,
    linkpath: entry.linkpath,
    uid: 0,
    gid: 0,
  }).encode(header, 0);
  const padded = Buffer.alloc(Math.ceil(body.length / 512) * 512);
  body.copy(padded);
  return Buffer.concat([header, padded]);
}

/** A whole tar: the entries and the two zero blocks that end it. */
export const tarArchive = (entries: TarEntrySpec[]): Buffer => Buffer.concat([...entries.map(tarEntry), Buffer.alloc(1024)]);

/**
 * Uploads `plain` (tar bytes) as a READY backup through the SDK: gzip, a fresh DEK, secretstream, the DEK
 * wrapped and the metadata sealed for the new id, exactly as the CLI does. `plaintextSha256` overrides the
 * sealed hash (an archive that fails its final check). Uses one upload slot (mind the plan's cadence).
 */
export async function uploadArchive(
  client: CofferClient,
  masterKey: Buffer,
  plain: Buffer,
  options: {
    plaintextSha256?: string;
    compression?: 'gzip' | 'zstd';
    archive?: 'tar' | 'raw';
    name?: string;
    /** Sent as the compressed stream instead of `plain` compressed (a hostile one); `plain` still gives the sealed size. */
    compressed?: Buffer;
  } = {},
): Promise<string> {
  const dek = newKey();
  try {
    const compressed = options.compressed ?? (options.compression === 'zstd' ? zstdCompress(plain) : zlib.gzipSync(plain));
    const sealed = await buffer(Readable.from([compressed]).pipe(new EncryptStream(dek)));
    const slot = await client.createBackup();
    if (slot.upload.protocol !== 'direct') throw new Error(`expected a direct upload slot, got ${slot.upload.protocol}`);
    await uploadDirect(client, client.directUploadUrl(slot.backupId), Readable.from([sealed]));
    const metadata: BackupMetadata = {
      format: 'coffer-archive/v1',
      name: options.name ?? 'hand-made',
      sourcePath: '/nowhere',
      createdAt: new Date().toISOString(),
      kind: 'directory',
      fileCount: 0,
      directoryCount: 0,
      symlinkCount: 0,
      archive: options.archive ?? 'tar',
      compression: options.compression ?? 'gzip',
      chunkBytes: CHUNK_BYTES,
      plaintextSizeBytes: plain.length,
      plaintextSha256: options.plaintextSha256 ?? createHash('sha256').update(plain).digest('hex'),
      ciphertextSizeBytes: sealed.length,
    };
    await client.finalizeBackup(slot.backupId, {
      cryptoVersion: 'v1',
      ...wrapDek(masterKey, slot.backupId, dek),
      ...sealMetadata(dek, slot.backupId, metadata),
      ciphertextSizeBytes: sealed.length,
      plaintextSizeBytes: plain.length,
    });
    return slot.backupId;
  } finally {
    wipe(dek);
  }
}

/**
 * zstd-compresses `plain` with node:zlib where the runtime has zstd (Node 22.15+), else with the zstd program
 * (Node 20 has no zstd compressor; Coffer restores zstd there with a pure-JavaScript decoder).
 */
export function zstdCompress(plain: Buffer): Buffer {
  const native = (zlib as unknown as { zstdCompressSync?: (b: Buffer) => Buffer }).zstdCompressSync;
  if (native) return native(plain);
  const made = spawnSync('zstd', ['-q', '-c'], { input: plain, maxBuffer: 1024 ** 3 });
  if (made.status !== 0)
    throw new Error(`no zstd compressor: node:zlib has none and the zstd program failed (${made.error?.message ?? made.stderr})`);
  return made.stdout;
}

/** Whether zstdCompress can work here. */
export const canZstd = (): boolean =>
  typeof (zlib as unknown as { zstdCompressSync?: unknown }).zstdCompressSync === 'function' ||
  spawnSync('zstd', ['--version']).status === 0;

/** A loopback HTTP server (a hostile or proxying peer for the CLI); close() also ends open connections. */
export async function listenHttp(handler: http.RequestListener) {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
