/**
 * The SDK as an application gets it: `npm install <server>/downloads/coffer-sdk.tgz` into a new project outside
 * this repository (its dependencies from a registry on a loopback port serving the packages this checkout installed,
 * test/helpers/npm-registry.ts; every other host through a proxy that is not there; HOME and the npm cache in the
 * temp dir), then a script of that project imports `coffer-sdk`, connects to the server and backs up and restores a
 * directory, on this Node and on each of COFFER_TEST_NODES (.ci/run: 22 and 24). A page that imports the package's
 * browser entry bundles with esbuild (platform browser) from the installed package alone. The server also serves the
 * SDK's generated reference at /docs/sdk/, and nothing beside it.
 */
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import semver from 'semver';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt } from '../helpers/built.js';
import { ManualClock } from '../helpers/clock.js';
import { startLocalRegistry } from '../helpers/npm-registry.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { snapshot } from '../client/helpers.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
/** The browser entry is B's part of issue 36; once its source exists, the package must export and bundle it. */
const HAS_BROWSER_ENTRY = fs.existsSync(path.join(ROOT, 'src/client/browser.ts'));

interface SdkManifest {
  name: string;
  version: string;
  exports: Record<string, unknown>;
  dependencies: Record<string, string>;
  engines: { node: string };
  coffer: { apiVersions: string };
}

/** Node executables to run the application on: this one, and COFFER_TEST_NODES (':'-separated) of other versions. */
function nodes(): { node: string; version: string }[] {
  const found = new Map([[process.version, process.execPath]]);
  for (const node of (process.env.COFFER_TEST_NODES ?? '').split(':').filter(Boolean)) {
    const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout?.trim();
    if (version && !found.has(version)) found.set(version, node);
  }
  return [...found].map(([version, node]) => ({ node, version }));
}

/** The application: the guide's own Node program (docs/sdk.md, the first block of its Node section), as it stands. */
const GUIDE_PROGRAM = /## Connect, unlock, back up, restore \(Node\)\n+```js\n([\s\S]*?)```/.exec(
  fs.readFileSync(path.join(ROOT, 'docs/sdk.md'), 'utf8'),
);
if (!GUIDE_PROGRAM) throw new Error("docs/sdk.md has no program under 'Connect, unlock, back up, restore (Node)'");
const HOST_APP = GUIDE_PROGRAM[1] as string;

describe('the SDK package served at /downloads/coffer-sdk.tgz', () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let project: string;
  let manifest: SdkManifest;

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    // Outside the repository, so nothing resolves from this checkout's node_modules.
    work = tempDir('coffer-sdk-package-', os.tmpdir());
    project = path.join(work, 'host-app');
    await fsp.mkdir(project);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('is an npm pack tarball of src/client with its declarations, the SDK packages only, and the API versions it speaks', async () => {
    const response = await fetch(`${server.url}/downloads/coffer-sdk.tgz`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/gzip');
    expect(response.headers.get('content-disposition')).toMatch(/^attachment; filename="coffer-sdk-\d+\.\d+\.\d+.*\.tgz"$/);
    const file = path.join(work, 'coffer-sdk.tgz');
    await fsp.writeFile(file, Buffer.from(await response.arrayBuffer()));
    const entries: string[] = [];
    let text = '';
    await tar.t({
      file,
      onReadEntry: (entry) => {
        entries.push(entry.path);
        if (entry.path === 'package/package.json') entry.on('data', (d: Buffer) => (text += d));
      },
    });
    manifest = JSON.parse(text) as SdkManifest;
    expect(entries).toContain('package/dist/client/index.js');
    expect(entries).toContain('package/dist/client/index.d.ts');
    expect(entries.filter((e) => /dist\/(cli|server|store|api|console|services|discovery|http|blobs|ops)\//.test(e))).toEqual([]);
    const ours = JSON.parse(await fsp.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string; engines: object };
    expect(manifest).toMatchObject({ name: 'coffer-sdk', version: ours.version, type: 'module', engines: ours.engines });
    // The server API versions it speaks: a semver range that this server's own version satisfies.
    expect(semver.validRange(manifest.coffer.apiVersions)).not.toBeNull();
    expect(semver.satisfies(ours.version, manifest.coffer.apiVersions)).toBe(true);
    expect(manifest.exports['.']).toMatchObject(HAS_BROWSER_ENTRY ? { browser: {}, node: {} } : { types: './dist/client/index.d.ts' });
    for (const serverOnly of ['fastify', 'kysely', 'pg', 'better-sqlite3', '@aws-sdk/client-s3', 'commander', 'cli-progress']) {
      expect(manifest.dependencies).not.toHaveProperty(serverOnly);
    }
    expect(manifest.dependencies).toHaveProperty('sodium-native');
    expect(manifest.dependencies).toHaveProperty('eventsource-parser');

    expect((await fetch(`${server.url}/downloads/coffer-cli.tgz`)).status).toBe(200);
    expect((await fetch(`${server.url}/downloads/package.json`)).status).toBe(404);
    expect((await fetch(`${server.url}/downloads/..%2Fpackage.json`)).status).toBe(404);
  });

  it('installs into a new project whose script backs up and restores a directory, on Node 20, 22 and 24', async () => {
    const registry = await startLocalRegistry(ROOT, Object.keys(manifest.dependencies));
    const home = path.join(work, 'home');
    await fsp.mkdir(home);
    const npmEnv = {
      ...process.env,
      HOME: home,
      npm_config_registry: `${registry.url}/`,
      npm_config_userconfig: path.join(home, '.npmrc'),
      npm_config_cache: path.join(work, 'npm-cache'),
      npm_config_update_notifier: 'false',
      // Anything not on loopback would go through this proxy, which is not there.
      npm_config_proxy: 'http://127.0.0.1:9',
      npm_config_https_proxy: 'http://127.0.0.1:9',
      npm_config_noproxy: '127.0.0.1',
    };
    try {
      await fsp.writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'host-app', private: true, type: 'module' }));
      await run('npm', ['install', `${server.url}/downloads/coffer-sdk.tgz`, '--no-audit', '--no-fund'], {
        cwd: project,
        env: npmEnv,
        timeout: 120_000,
      });
    } finally {
      await registry.close();
    }
    const installed = JSON.parse(await fsp.readFile(path.join(project, 'node_modules/coffer-sdk/package.json'), 'utf8'));
    expect(installed.name).toBe('coffer-sdk');
    await fsp.writeFile(path.join(project, 'backup-and-restore.mjs'), HOST_APP);

    const source = path.join(work, 'app-data');
    await fsp.mkdir(path.join(source, 'db'), { recursive: true });
    await fsp.writeFile(path.join(source, 'settings.json'), '{"theme":"dark"}\n');
    await fsp.writeFile(path.join(source, 'db', 'pages.bin'), Buffer.alloc(90_000, 3));
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const runtimes = nodes();
    for (const { node, version } of runtimes) {
      clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes
      const target = path.join(work, `restored-${version}`);
      // The first run finds no vault and makes one (init); the others unlock it.
      const env = {
        PATH: process.env.PATH,
        HOME: home,
        COFFER_URL: server.url,
        COFFER_API_KEY: apiKey,
        COFFER_PASSPHRASE: 'sdk passphrase ✓',
      };
      const { stdout } = await run(node, ['backup-and-restore.mjs', source, target], { cwd: project, env, timeout: 60_000 });
      expect(stdout, version).toMatch(/^backup \S+ READY$/m);
      expect(await snapshot(target), version).toEqual(await snapshot(source));
    }
    const listed = await fetch(`${server.url}/api/backups`, { headers: { authorization: `Bearer ${apiKey}` } });
    const { backups } = (await listed.json()) as { backups: { hostappVersion: string | null }[] };
    expect(backups.map((b) => b.hostappVersion)).toEqual(runtimes.map(() => 'my-app/2.3.0'));
  }, 240_000);

  it.skipIf(!HAS_BROWSER_ENTRY)('bundles a page for the browser from the installed package alone (esbuild, platform browser)', async () => {
    await fsp.writeFile(path.join(project, 'page.js'), "import * as coffer from 'coffer-sdk';\nconsole.log(Object.keys(coffer));\n");
    const result = await build({
      absWorkingDir: project,
      entryPoints: ['page.js'],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      outdir: 'out',
      logLevel: 'silent',
    });
    expect(result.errors).toEqual([]);
    const bundled = result.outputFiles.map((f) => f.text).join('\n');
    expect(bundled).not.toMatch(/from\s*["']node:/);
  });

  it('serves its generated reference at /docs/sdk/ and only the reference files', async () => {
    const index = await fetch(`${server.url}/docs/sdk/`);
    // The reference opens with the guide (docs/sdk.md).
    const guideHeading = /^## (.+)$/m.exec(fs.readFileSync(path.join(ROOT, 'docs/sdk.md'), 'utf8'))![1];
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await index.text();
    expect(html).toContain('coffer-sdk');
    expect(html).toContain(guideHeading);
    // One module per entry (index: Node's, browser) once there are two; before, the Node entry's members at the top.
    const classPage = await fetch(`${server.url}/docs/sdk/classes/${HAS_BROWSER_ENTRY ? 'index.' : ''}CofferClient.html`);
    expect(classPage.status).toBe(200);
    expect(await classPage.text()).toContain('CofferClient');
    if (HAS_BROWSER_ENTRY) expect((await fetch(`${server.url}/docs/sdk/modules/browser.html`)).status).toBe(200);
    expect((await fetch(`${server.url}/docs/sdk/assets/style.css`)).headers.get('content-type')).toMatch(/^text\/css/);
    for (const escape of [
      '/docs/sdk/..%2F..%2Fpackage.json',
      '/docs/sdk/%2e%2e/%2e%2e/package.json',
      '/docs/sdk/.inputs',
      '/docs/sdk/nothing.html',
    ]) {
      expect((await fetch(`${server.url}${escape}`)).status, escape).toBe(404);
    }
  });
});
