/**
 * The server serves its own CLI: `npm install -g {base}/downloads/coffer-cli.tgz` into a temporary prefix installs a
 * working `coffer`, which backs up and restores against that server. Its dependencies come from a registry on a
 * loopback port serving the packages this checkout installed (test/helpers/npm-registry.ts), and every other host
 * goes through a proxy that is not there: the test needs no network.
 * The package is the client only: none of the server's modules or dependencies.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalRegistry } from '../helpers/npm-registry.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { baseEnv, snapshot } from '../client/helpers.js';
import { assertConsoleBuilt } from './helpers.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');

/** The package.json inside the served tarball. */
async function cliManifest(base: string): Promise<{ dependencies: Record<string, string> }> {
  const dir = tempDir('coffer-cli-manifest-');
  const file = path.join(dir, 'coffer-cli.tgz');
  await fsp.writeFile(file, Buffer.from(await (await fetch(`${base}/downloads/coffer-cli.tgz`)).arrayBuffer()));
  let text = '';
  await tar.t({ file, filter: (p) => p === 'package/package.json', onReadEntry: (e) => e.on('data', (d: Buffer) => (text += d)) });
  return JSON.parse(text) as { dependencies: Record<string, string> };
}

describe('the CLI package served at /downloads/coffer-cli.tgz', () => {
  let server: TestServer;
  let work: string;

  beforeAll(async () => {
    assertConsoleBuilt();
    server = await startTestServer();
    work = tempDir('coffer-cli-package-');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('is an npm pack tarball of the client only, with its digest published on /console/api/about', async () => {
    const response = await fetch(`${server.url}/downloads/coffer-cli.tgz`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/gzip');
    const bytes = Buffer.from(await response.arrayBuffer());
    expect(Number(response.headers.get('content-length'))).toBe(bytes.length);
    const about = (await (await fetch(`${server.url}/console/api/about`)).json()) as { cli: { bytes: number; sha256: string } };
    expect(about.cli.bytes).toBe(bytes.length);
    const { createHash } = await import('node:crypto');
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(about.cli.sha256);

    const file = path.join(work, 'coffer-cli.tgz');
    await fsp.writeFile(file, bytes);
    const entries: string[] = [];
    await tar.t({ file, onReadEntry: (entry) => entries.push(entry.path) });
    expect(entries).toContain('package/package.json');
    expect(entries).toContain('package/dist/cli/client-main.js');
    expect(entries.filter((e) => /dist\/(server|store|api|console|services|discovery)\//.test(e))).toEqual([]);
    const manifest = JSON.parse(
      await new Promise<string>((resolve, reject) => {
        let text = '';
        tar
          .t({ file, filter: (p) => p === 'package/package.json', onReadEntry: (e) => e.on('data', (d: Buffer) => (text += d)) })
          .then(() => resolve(text), reject);
      }),
    );
    expect(manifest).toMatchObject({ name: 'coffer-cli', bin: { coffer: 'dist/cli/client-main.js' } });
    expect(Object.keys(manifest.dependencies).sort()).toEqual([
      '@bomb.sh/tab',
      '@noble/hashes',
      '@noble/post-quantum',
      '@scure/base',
      '@scure/bip39',
      'cli-progress',
      'commander',
      'eventsource-parser',
      'fzstd',
      'ignore',
      'qrcode',
      'sodium-native',
      'tar',
      'zod',
    ]);
  });

  it('is what the public CLI guidance (docs and MCP) tells people to install', async () => {
    const doc = await (await fetch(`${server.url}/docs/cli.md`)).text();
    expect(doc).toContain(`npm install -g ${server.url}/downloads/coffer-cli.tgz`);
    const full = await (await fetch(`${server.url}/llms-full.txt`)).text();
    expect(full).toContain(`npm install -g ${server.url}/downloads/coffer-cli.tgz`);
  });

  it('installs with `npm install -g <url> --prefix <tmp>` into a working `coffer` that backs up and restores', async () => {
    const prefix = path.join(work, 'prefix');
    const packed = await cliManifest(server.url);
    const registry = await startLocalRegistry(ROOT, Object.keys(packed.dependencies));
    try {
      await fsp.writeFile(path.join(work, 'npmrc'), '');
      await run('npm', ['install', '-g', `${server.url}/downloads/coffer-cli.tgz`, '--prefix', prefix, '--no-audit', '--no-fund'], {
        env: {
          ...process.env,
          npm_config_registry: `${registry.url}/`,
          npm_config_userconfig: path.join(work, 'npmrc'),
          npm_config_cache: path.join(work, 'npm-cache'),
          npm_config_update_notifier: 'false',
          // Anything not on loopback would go through this proxy, which is not there.
          npm_config_proxy: 'http://127.0.0.1:9',
          npm_config_https_proxy: 'http://127.0.0.1:9',
          npm_config_noproxy: '127.0.0.1',
        },
        timeout: 120_000,
      });
    } finally {
      await registry.close();
    }
    const coffer = path.join(prefix, 'bin', 'coffer');
    expect(fs.existsSync(coffer)).toBe(true);
    const help = await run(coffer, ['--help'], { env: baseEnv() });
    expect(help.stdout).toContain('Usage: coffer');
    for (const command of ['init', 'backup', 'restore', 'list', 'watch', 'passphrase']) expect(help.stdout).toContain(command);
    // The packed CLI knows Coffer's version, read from the package.json it ships with.
    const { version } = JSON.parse(await fsp.readFile('package.json', 'utf8')) as { version: string };
    expect((await run(coffer, ['--version'], { env: baseEnv() })).stdout.trim()).toBe(version);
    // Shell completion comes with it, and the installed program answers the script's questions.
    expect((await run(coffer, ['completion', 'bash'], { env: baseEnv() })).stdout).toContain('complete -F __coffer_complete coffer');
    expect((await run(coffer, ['complete', '--', 'rest'], { env: baseEnv() })).stdout).toMatch(/^restore\t/m);

    // It really works: a small backup and restore against this server, with the installed binary.
    const { apiKey } = await server.newKey({ plan: 'pro' });
    const env = baseEnv({ COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: 'installed ✓', COFFER_KDF: 'min' });
    const source = path.join(work, 'notes');
    await fsp.mkdir(path.join(source, 'sub'), { recursive: true });
    await fsp.writeFile(path.join(source, 'a.txt'), 'alpha\n');
    await fsp.writeFile(path.join(source, 'sub', 'b.bin'), Buffer.alloc(70_000, 7));
    await run(coffer, ['init'], { env });
    const backup = JSON.parse((await run(coffer, ['backup', source, '--json'], { env })).stdout) as { id: string; status: string };
    expect(backup.status).toBe('READY');
    const target = path.join(work, 'restored');
    await run(coffer, ['restore', backup.id, target], { env });
    expect(await snapshot(target)).toEqual(await snapshot(source));
  }, 150_000);
});
