/**
 * The SDK's examples (examples/) run as their READMEs say, as a user runs them: each example is copied to a temp
 * directory outside this repository, installs coffer-sdk from a running server with the README's own
 * `npm install "$COFFER_URL/downloads/coffer-sdk.tgz"` (its dependencies from a loopback registry serving what
 * this checkout installed, test/helpers/npm-registry.ts; HOME and one npm cache for the file in the temp dir), then
 * runs the README's commands through a shell: the Node host application backs up once and restores byte for byte;
 * the dump script streams pg_dump of a schema of its own and the restored dump loads back; the web page, built
 * by esbuild from the installed package, backs up a file chosen in real Chromium with only the recipient, and the
 * real CLI restores it byte for byte.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import * as tar from 'tar';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { endsWithTest } from '../helpers/children.js';
import { ManualClock } from '../helpers/clock.js';
import { startLocalRegistry, type LocalRegistry } from '../helpers/npm-registry.js';
import { skipPg } from '../helpers/pg.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, baseEnv, cliFor, json, ROOT, snapshot, type Cli } from '../client/helpers.js';

const EXAMPLES = path.join(ROOT, 'examples');
/** The browser bundle's budget (gzip bytes), set and explained in bench/sdk-budget.json; bench/sdk.js measures against it. */
const BUNDLE_BUDGET = JSON.parse(fs.readFileSync(path.join(ROOT, 'bench/sdk-budget.json'), 'utf8')) as {
  gzipBytes: number;
  gzipBytesWithoutWasm: number;
};
const INSTALL = 'npm install "$COFFER_URL/downloads/coffer-sdk.tgz"';
const PASSPHRASE = 'examples passphrase';
/** The pro plan allows one backup per 30 minutes: the server's clock is moved past it before each backup. */
const CADENCE_MS = 31 * 60 * 1000;

interface ShellResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one README command line with `sh -c` in `cwd`. */
function shell(command: string, cwd: string, env: Record<string, string>): Promise<ShellResult> {
  return new Promise((resolve) => {
    execFile('sh', ['-c', command], { cwd, env, timeout: 180_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
    );
  });
}

/** The dependencies the served coffer-sdk package names (the loopback registry serves those). */
async function sdkDependencies(serverUrl: string, work: string): Promise<string[]> {
  const file = path.join(work, 'coffer-sdk.tgz');
  await fsp.writeFile(file, Buffer.from(await (await fetch(`${serverUrl}/downloads/coffer-sdk.tgz`)).arrayBuffer()));
  let text = '';
  await tar.t({
    file,
    onReadEntry: (entry) => {
      if (entry.path === 'package/package.json') entry.on('data', (d: Buffer) => (text += d));
    },
  });
  return Object.keys((JSON.parse(text) as { dependencies: Record<string, string> }).dependencies);
}

/** `dir` served over HTTP on 127.0.0.1 (another origin than the API's, as an application's page is). */
async function serveStatic(dir: string): Promise<{ url: string; close(): Promise<void> }> {
  const types: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };
  const server = http.createServer((request, response) => {
    const name = new URL(request.url ?? '/', 'http://x').pathname.replace(/^\/$/, '/index.html');
    const file = path.join(dir, path.normalize(name));
    if (!file.startsWith(dir + path.sep) || !fs.existsSync(file)) return void response.writeHead(404).end();
    response.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream' }).end(fs.readFileSync(file));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const psql = (sql: string) =>
  new Promise<string>((resolve, reject) =>
    execFile(
      'psql',
      ['-h', '127.0.0.1', '-U', 'postgres', '-d', 'test', '-v', 'ON_ERROR_STOP=1', '-At', '-c', sql],
      (error, stdout, stderr) => (error ? reject(new Error(`${error.message}: ${stderr}`)) : resolve(stdout.trim())),
    ),
  );

describe('the SDK examples, installed from a running server as a user installs them', () => {
  let server: TestServer;
  let clock: ManualClock;
  let registry: LocalRegistry;
  let work: string;
  let npmEnv: Record<string, string>;

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    // Outside the repository, so nothing resolves from this checkout's node_modules.
    work = tempDir('coffer-sdk-examples-', os.tmpdir());
    const home = path.join(work, 'home');
    await fsp.mkdir(home);
    registry = await startLocalRegistry(ROOT, [...(await sdkDependencies(server.url, work)), 'esbuild']);
    npmEnv = baseEnv({
      HOME: home,
      COFFER_URL: server.url,
      npm_config_registry: `${registry.url}/`,
      npm_config_userconfig: path.join(home, '.npmrc'),
      npm_config_cache: path.join(work, 'npm-cache'),
      npm_config_update_notifier: 'false',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      // Anything not on loopback would go through this proxy, which is not there.
      npm_config_proxy: 'http://127.0.0.1:9',
      npm_config_https_proxy: 'http://127.0.0.1:9',
      npm_config_noproxy: '127.0.0.1',
    });
  });
  afterAll(async () => {
    await registry?.close();
    await server?.stop();
  });

  /** A copy of examples/<name> in the temp dir with the SDK installed by the README's command. */
  async function installExample(name: string): Promise<{ dir: string; readme: string }> {
    const dir = path.join(work, name);
    await fsp.cp(path.join(EXAMPLES, name), dir, { recursive: true, filter: (from) => !/node_modules|package-lock\.json/.test(from) });
    const readme = await fsp.readFile(path.join(dir, 'README.md'), 'utf8');
    expect(readme).toContain(INSTALL);
    const installed = await shell(INSTALL, dir, npmEnv);
    expect(installed.code, installed.stderr).toBe(0);
    const sdk = JSON.parse(await fsp.readFile(path.join(dir, 'node_modules/coffer-sdk/package.json'), 'utf8')) as { name: string };
    expect(sdk.name).toBe('coffer-sdk');
    return { dir, readme };
  }

  /** A new pro account with a vault (`coffer init`), and the environment its README asks for. */
  async function newVault(): Promise<{ apiKey: string; accountId: string; cli: Cli; env: Record<string, string> }> {
    const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
    const cli = cliFor(server.url, apiKey, PASSPHRASE);
    const init = await cli(['init']);
    expect(init.code, init.stderr).toBe(0);
    return { apiKey, accountId, cli, env: { ...npmEnv, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: PASSPHRASE } };
  }

  /** Runs `command`, a line the README shows, and expects it to succeed. */
  async function runAsReadmeSays(readme: string, command: string, cwd: string, env: Record<string, string>): Promise<string> {
    expect(readme).toContain(command);
    const result = await shell(command, cwd, env);
    expect(result.code, `${command}: ${result.stderr}`).toBe(0);
    return result.stdout;
  }

  /** The hostappVersion of each backup the account holds (a failed backup's slot is DELETED by the SDK). */
  const hostappVersions = async (apiKey: string) => {
    const answer = await fetch(`${server.url}/api/backups`, { headers: { authorization: `Bearer ${apiKey}` } });
    const { backups } = (await answer.json()) as { backups: { status: string; hostappVersion: string | null }[] };
    return backups.filter((b) => b.status !== 'DELETED').map((b) => b.hostappVersion);
  };

  it('node-host-app: backs up its data directory once with its hostappVersion, and restores it byte for byte', async () => {
    const { dir, readme } = await installExample('node-host-app');
    const { apiKey, env } = await newVault();
    const data = path.join(dir, 'data');
    await fsp.mkdir(path.join(data, 'db'), { recursive: true });
    await fsp.writeFile(path.join(data, 'settings.json'), '{"theme":"dark"}\n');
    await fsp.writeFile(path.join(data, 'db', 'pages.bin'), randomBytes(300_000));

    clock.advance(CADENCE_MS);
    const backedUp = JSON.parse(await runAsReadmeSays(readme, 'node host-app.mjs backup ./data --once', dir, env));
    expect(backedUp).toMatchObject({ status: 'READY' });
    const restored = JSON.parse(await runAsReadmeSays(readme, 'node host-app.mjs restore ./restored', dir, env));
    expect(restored).toMatchObject({ restored: backedUp.backedUp });
    expect(await snapshot(path.join(dir, 'restored'))).toEqual(await snapshot(data));
    expect(await hostappVersions(apiKey)).toEqual(['example-host-app/1.0.0']);
  }, 240_000);

  it('node-host-app: on a schedule, a backup the cadence refuses is reported and the schedule goes on until Ctrl-C', async () => {
    const dir = path.join(work, 'node-host-app');
    const { apiKey, env } = await newVault();
    await fsp.mkdir(path.join(dir, 'scheduled'));
    await fsp.writeFile(path.join(dir, 'scheduled', 'state.txt'), 'v1\n');
    clock.advance(CADENCE_MS);
    // Every 0.6 s: the first backup is made, the next ones are within the plan's 30 minutes.
    const child = spawn('node', ['host-app.mjs', 'backup', './scheduled', '--every', '0.01'], { cwd: dir, env });
    endsWithTest(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    await expect.poll(() => stderr, { timeout: 60_000, interval: 200 }).toMatch(/backup skipped: the plan allows the next one at \d{4}-/);
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(JSON.parse(stdout.split('\n')[0]!)).toMatchObject({ status: 'READY' });
    expect(await hostappVersions(apiKey)).toEqual(['example-host-app/1.0.0']);
  }, 120_000);

  describe.skipIf(skipPg)('db-dump', () => {
    const schema = `coffer_example_${randomBytes(4).toString('hex')}`;
    afterAll(async () => {
      await psql(`drop schema if exists ${schema} cascade`);
    });

    it('streams pg_dump of a schema into a backup, and the restored dump loads back', async () => {
      const { dir, readme } = await installExample('db-dump');
      const { env } = await newVault();
      await psql(
        `create schema ${schema}; create table ${schema}.notes (id int primary key, body text);` +
          `insert into ${schema}.notes select n, repeat(md5(n::text), 20) from generate_series(1, 2000) n;`,
      );
      const before = await psql(`select count(*), md5(string_agg(body, '' order by id)) from ${schema}.notes`);

      // The README's command for the schema `app`, here for this test's own schema.
      const readmeBackup = 'node db-dump.mjs backup app.sql -- pg_dump --no-owner --schema=app -h 127.0.0.1 -U postgres test';
      expect(readme).toContain(readmeBackup);
      clock.advance(CADENCE_MS);
      const backup = await shell(readmeBackup.replace('--schema=app', `--schema=${schema}`), dir, env);
      expect(backup.code, backup.stderr).toBe(0);
      expect(JSON.parse(backup.stdout)).toMatchObject({ status: 'READY' });
      expect(fs.readdirSync(dir).filter((name) => name.endsWith('.sql'))).toEqual([]); // no temp file

      await psql(`drop schema ${schema} cascade`);
      await runAsReadmeSays(readme, 'node db-dump.mjs restore ./app.sql', dir, env);
      await runAsReadmeSays(readme, 'psql -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d test -f ./app.sql', dir, env);
      expect(await psql(`select count(*), md5(string_agg(body, '' order by id)) from ${schema}.notes`)).toBe(before);
    }, 240_000);

    it('fails the backup, and leaves nothing on the server, when the dump command fails', async () => {
      const dir = path.join(work, 'db-dump');
      const { apiKey, env } = await newVault();
      clock.advance(CADENCE_MS);
      const failed = await shell(`node db-dump.mjs backup broken.sql -- sh -c 'echo "CREATE TABLE half"; exit 3'`, dir, env);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain('sh exited with 3');
      expect(await hostappVersions(apiKey)).toEqual([]);
    }, 60_000);
  });

  describe.skipIf(!hasChromium)('web-recipient', () => {
    it('is built by esbuild from the installed package; Chromium backs up a chosen file with only the recipient; the CLI restores it', async () => {
      const { dir, readme } = await installExample('web-recipient');
      const { accountId, cli } = await newVault();
      const { recipient } = json<{ recipient: string }>(await cli(['recipient', '--json']));
      // The page gets a key that can only write backups, as the README advises.
      const { apiKey: pageKey } = await server.newKey({ accountId, scopes: ['backups:write'] });
      await runAsReadmeSays(readme, 'npm run build', dir, npmEnv);
      const bundle = await fsp.readFile(path.join(dir, 'public/page.js'), 'utf8');
      expect(bundle).not.toMatch(/from\s*["']node:/);
      // The application's whole bundle (the page and the SDK, libsodium's WebAssembly inline) within the SDK's budget.
      expect(gzipSync(bundle, { level: 6 }).length).toBeLessThanOrEqual(BUNDLE_BUDGET.gzipBytes);
      // ...and without libsodium's WebAssembly (libsodium-sumo carries it inline), the SDK's own JavaScript.
      const withoutWasm = await build({
        absWorkingDir: dir,
        entryPoints: ['src/page.js'],
        bundle: true,
        platform: 'browser',
        format: 'esm',
        minify: true,
        write: false,
        logLevel: 'silent',
        external: ['libsodium-sumo'],
      });
      expect(gzipSync(withoutWasm.outputFiles[0]!.contents, { level: 6 }).length).toBeLessThanOrEqual(BUNDLE_BUDGET.gzipBytesWithoutWasm);

      const file = path.join(work, 'chosen-file.bin');
      const bytes = randomBytes(500_000 + 11);
      await fsp.writeFile(file, bytes);
      const site = await serveStatic(path.join(dir, 'public'));
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        const pageErrors: string[] = [];
        page.on('pageerror', (error) => pageErrors.push(String(error)));
        await page.goto(`${site.url}/?${new URLSearchParams({ url: server.url, recipient })}`);
        await page.fill('#api-key', pageKey);
        await page.setInputFiles('#file', file);
        clock.advance(CADENCE_MS);
        await page.click('#submit');
        const result = page.locator('#result');
        await expect.poll(() => result.textContent(), { timeout: 60_000 }).toMatch(/^(Backed up|Backup failed)/);
        expect(await result.textContent()).toMatch(/^Backed up: \S+ \(READY\)$/);
        const id = await result.getAttribute('data-backup-id');
        expect(pageErrors).toEqual([]);

        const target = path.join(work, 'restored-from-the-page');
        const restored = await cli(['restore', id!, target]);
        expect(restored.code, restored.stderr).toBe(0);
        expect((await fsp.readFile(path.join(target, 'chosen-file.bin'))).equals(bytes)).toBe(true);
        const listed = json<{ backups: { hostappVersion: string }[] }>(await cli(['list', '--json']));
        expect(listed.backups.map((b) => b.hostappVersion)).toEqual(['example-web-recipient/1.0.0']);
      } finally {
        await browser.close();
        await site.close();
      }
    }, 240_000);

    it('a page bundled from the installed package alone restores a CLI backup in Chromium, byte for byte', async () => {
      const { dir } = await installExample('web-recipient');
      const { apiKey, cli } = await newVault();
      const file = path.join(work, 'from-the-cli.bin');
      const bytes = randomBytes(300_000 + 7);
      await fsp.writeFile(file, bytes);
      clock.advance(CADENCE_MS);
      const { id } = json<{ id: string }>(await cli(['backup', file, '--json']));
      // The application: unlock with the passphrase, restore to entries, hash each file (a secure context: loopback).
      await fsp.writeFile(
        path.join(dir, 'src/restore.js'),
        `import { connect } from 'coffer-sdk';
window.restoreBackup = async (url, apiKey, passphrase, id) => {
  const vault = await connect({ url, apiKey }).unlock({ passphrase });
  const files = {};
  for await (const entry of vault.restore(id)) {
    if (entry.type !== 'file') continue;
    const digest = await crypto.subtle.digest('SHA-256', await new Response(entry.stream).arrayBuffer());
    files[entry.name] = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
  }
  vault.close();
  return files;
};
`,
      );
      await build({
        absWorkingDir: dir,
        entryPoints: ['src/restore.js'],
        bundle: true,
        platform: 'browser',
        format: 'esm',
        target: 'es2022',
        outfile: 'public/restore.js',
        logLevel: 'silent',
      });
      await fsp.writeFile(path.join(dir, 'public/restore.html'), '<!doctype html><script type="module" src="./restore.js"></script>');
      const site = await serveStatic(path.join(dir, 'public'));
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        const pageErrors: string[] = [];
        page.on('pageerror', (error) => pageErrors.push(String(error)));
        await page.goto(`${site.url}/restore.html`);
        await page.waitForFunction(() => 'restoreBackup' in window);
        const files = await page.evaluate(
          ([url, key, passphrase, backupId]) =>
            (window as unknown as { restoreBackup: (...args: string[]) => Promise<Record<string, string>> }).restoreBackup(
              url!,
              key!,
              passphrase!,
              backupId!,
            ),
          [server.url, apiKey, PASSPHRASE, id],
        );
        expect(files).toEqual({ 'from-the-cli.bin': createHash('sha256').update(bytes).digest('hex') });
        expect(pageErrors).toEqual([]);
      } finally {
        await browser.close();
        await site.close();
      }
    }, 240_000);
  });
});
