/**
 * `npm start` builds only when the build is missing or older than a source (scripts/build-quietly.mjs with
 * scripts/build-stamp.mjs), and says so on stderr before it builds. Run through the real `npm start` (its prestart
 * and start scripts as package.json has them) in a copy of this checkout with its dist/ and the files' times kept.
 * In the copy, `npm run build` itself is replaced by one that only writes dist/.built: what is under test is whether
 * a start builds, not the build (which has its own tests and takes a minute).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt } from '../helpers/built.js';
import { tempDir } from '../helpers/tmp.js';
import { ROOT } from '../client/helpers.js';

const STUB_BUILD = `node -e "require('fs').writeFileSync('dist/.built', 'stub build ' + process.pid)"`;

let checkout: string;
const children = new Set<ReturnType<typeof spawn>>();

/** `npm start` in the copy until the server listens; its stderr and whether dist/.built changed. */
async function npmStart(): Promise<{ stderr: string; stamp: string }> {
  const dataDir = tempDir('coffer-npm-start-data-');
  const child = spawn('npm', ['start'], {
    cwd: checkout,
    detached: true, // its own process group: npm, sh and the server stop together
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      COFFER_DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      NODE_DISABLE_COMPILE_CACHE: '1',
      npm_config_update_notifier: 'false',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let stderr = '';
  let stdout = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await expect.poll(() => /listening on/.test(stderr) || child.exitCode !== null, { timeout: 120_000, interval: 100 }).toBe(true);
    expect(stderr, stdout).toMatch(/listening on/);
  } finally {
    process.kill(-child.pid!, 'SIGKILL');
    await exited;
    children.delete(child);
  }
  return { stderr, stamp: fs.readFileSync(path.join(checkout, 'dist/.built'), 'utf8') };
}

beforeAll(() => {
  assertBuilt();
  checkout = tempDir('coffer-npm-start-');
  for (const entry of ['src', 'console', 'scripts', 'dist', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
    fs.cpSync(path.join(ROOT, entry), path.join(checkout, entry), { recursive: true, preserveTimestamps: true });
  }
  // A directory's time moved as the copy filled it (cpSync sets it first): back to the original's, deepest first.
  const folders = ['src', 'console'].flatMap((top) => [
    top,
    ...(fs.readdirSync(path.join(ROOT, top), { recursive: true }) as string[]).map((entry) => path.join(top, entry)),
  ]);
  for (const folder of folders.reverse()) {
    const { atime, mtime } = fs.statSync(path.join(ROOT, folder));
    fs.utimesSync(path.join(checkout, folder), atime, mtime);
  }
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules'));
  const manifestFile = path.join(checkout, 'package.json');
  const manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8')) as { scripts: Record<string, string> };
  manifest.scripts.build = STUB_BUILD;
  const { mtime } = fs.statSync(manifestFile);
  fs.writeFileSync(manifestFile, JSON.stringify(manifest, null, 2));
  fs.utimesSync(manifestFile, mtime, mtime); // the stub is not a change of the sources
});

afterAll(() => {
  for (const child of children) process.kill(-child.pid!, 'SIGKILL');
});

describe('npm start', () => {
  it('starts without building when nothing changed since the last build', { timeout: 180_000 }, async () => {
    const before = fs.readFileSync(path.join(checkout, 'dist/.built'), 'utf8');
    const beforeTime = fs.statSync(path.join(checkout, 'dist/.built')).mtimeMs;
    const start = await npmStart();
    expect(start.stderr).not.toMatch(/building/);
    expect(start.stamp).toBe(before);
    expect(fs.statSync(path.join(checkout, 'dist/.built')).mtimeMs).toBe(beforeTime);
  });

  it('builds, saying so first, when a source is newer than the build, and not on the start after', { timeout: 300_000 }, async () => {
    const source = path.join(checkout, 'src/config.ts');
    const now = new Date();
    fs.utimesSync(source, now, now); // what an edit, a git pull or a checkout does to a file's time
    const rebuilt = await npmStart();
    expect(rebuilt.stderr.split('\n')[0]).toBe(
      'coffer: building (dist is older than src/config.ts; about a minute, longer the first time; its output goes to build.log)…',
    );
    expect(rebuilt.stamp).toMatch(/^stub build \d+$/);

    const next = await npmStart();
    expect(next.stderr).not.toMatch(/building/);
    expect(next.stamp).toBe(rebuilt.stamp);
  });

  it('builds a checkout that was never built (a fresh clone), saying so first', { timeout: 180_000 }, async () => {
    fs.rmSync(path.join(checkout, 'dist/.built'));
    const first = await npmStart();
    expect(first.stderr.split('\n')[0]).toMatch(/^coffer: building \(dist is missing; /);
    expect(first.stamp).toMatch(/^stub build \d+$/);
  });
});
