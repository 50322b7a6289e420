/**
 * The server and the operator commands create their files owner-only whoever starts them: under a shell's umask 022
 * (`npm start`), the data directory and every directory in it are 0700, the SQLite database with its -wal and -shm,
 * the blobs and a `coffer admin snapshot` 0600 (src/server/file-modes.ts). With COFFER_ACCEL_REDIRECT nginx reads the
 * blobs through the group: the group bits the umask grants stay, nothing for others. Real `coffer serve` and
 * `coffer admin` processes, started through `sh -c 'umask 022; exec …'`.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { tempDir } from '../helpers/tmp.js';

const BIN = path.resolve('dist/cli/main.js');
const UNDER_UMASK_022 = ['-c', 'umask 022 && exec "$@"', 'sh', process.execPath, BIN];
const children: ChildProcess[] = [];

/** `coffer serve` under umask 022 on `dataDir` until it listens: its URL and the first start's key. */
async function serve(dataDir: string, env: Record<string, string> = {}): Promise<{ url: string; apiKey: string }> {
  const child = spawn('sh', [...UNDER_UMASK_022, 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', COFFER_DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk));
  await expect.poll(() => /listening on (\S+)/.test(output) || child.exitCode !== null, { timeout: 60_000, interval: 100 }).toBe(true);
  const url = /listening on (\S+)/.exec(output)?.[1];
  if (!url) throw new Error(`coffer serve did not start: ${output}`);
  return { url, apiKey: /API key \(shown once, store it now\): (cfk_\S+)/.exec(output)![1]! };
}

/** `coffer admin …` under umask 022 on `dataDir`. */
function admin(dataDir: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'sh',
      [...UNDER_UMASK_022, 'admin', ...args],
      { env: { ...process.env, COFFER_DATA_DIR: dataDir } },
      (error, stdout, stderr) => (error ? reject(new Error(`coffer admin ${args.join(' ')}: ${stderr}`)) : resolve(stdout)),
    );
  });
}

/** One stored backup, so that blobs/ holds a file. */
async function storeBackup(url: string, apiKey: string): Promise<void> {
  const call = api(url, apiKey);
  expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
  const id = ((await call('POST', '/api/backups')).body as { backupId: string }).backupId;
  const data = new Uint8Array(4096).fill(7);
  const uploaded = await call('POST', `/api/backups/upload?backupId=${id}`, {
    body: data,
    headers: { 'content-type': 'application/octet-stream' },
  });
  expect(uploaded.status).toBe(201);
  expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
}

/** Every entry under `root` (itself included) with its permission bits, e.g. `blobs/backups 700`. */
function modes(root: string): Map<string, string> {
  const entries = ['', ...(fs.readdirSync(root, { recursive: true }) as string[])];
  return new Map(entries.map((entry) => [entry || '.', (fs.statSync(path.join(root, entry)).mode & 0o777).toString(8)]));
}

beforeAll(() => assertBuilt());

afterAll(async () => {
  await Promise.all(
    children.map((child) =>
      child.exitCode !== null || child.signalCode !== null
        ? undefined
        : new Promise<void>((resolve) => {
            child.once('exit', () => resolve());
            child.kill('SIGKILL');
          }),
    ),
  );
});

describe('under umask 022', () => {
  it(
    'coffer serve makes its data directory 0700 and the database (-wal, -shm), blobs and a snapshot 0600',
    { timeout: 120_000 },
    async () => {
      const work = tempDir('coffer-modes-');
      const dataDir = path.join(work, 'data'); // made by the server, as ./data is by a first npm start
      const { url, apiKey } = await serve(dataDir);
      await storeBackup(url, apiKey);
      await admin(dataDir, ['snapshot', path.join(work, 'snapshot.sqlite')]);

      const found = modes(dataDir);
      for (const name of ['coffer.sqlite', 'coffer.sqlite-wal', 'coffer.sqlite-shm']) expect(found.get(name), name).toBe('600');
      expect([...found.keys()].some((name) => /^blobs\/backups\/.+\.bin$/.test(name))).toBe(true);
      for (const [name, mode] of found) {
        const isDirectory = fs.statSync(path.join(dataDir, name)).isDirectory();
        expect(`${name} ${mode}`).toBe(`${name} ${isDirectory ? '700' : '600'}`);
      }
      expect((fs.statSync(path.join(work, 'snapshot.sqlite')).mode & 0o777).toString(8)).toBe('600');
    },
  );

  it('coffer admin, the first to open a data directory, makes it owner-only too', { timeout: 60_000 }, async () => {
    const dataDir = path.join(tempDir('coffer-modes-admin-'), 'data');
    await admin(dataDir, ['accounts', 'create', '--plan', 'free', '--json']);
    const found = modes(dataDir);
    expect(found.get('coffer.sqlite')).toBe('600');
    for (const [name, mode] of found) {
      const isDirectory = fs.statSync(path.join(dataDir, name)).isDirectory();
      expect(`${name} ${mode}`).toBe(`${name} ${isDirectory ? '700' : '600'}`);
    }
  });

  it('with COFFER_ACCEL_REDIRECT the group may read (nginx), others still nothing', { timeout: 120_000 }, async () => {
    const dataDir = path.join(tempDir('coffer-modes-accel-'), 'data');
    const { url, apiKey } = await serve(dataDir, { COFFER_ACCEL_REDIRECT: '/_coffer_blobs' });
    await storeBackup(url, apiKey);
    const found = modes(dataDir);
    expect([...found.keys()].some((name) => /^blobs\/backups\/.+\.bin$/.test(name))).toBe(true);
    for (const [name, mode] of found) {
      const isDirectory = fs.statSync(path.join(dataDir, name)).isDirectory();
      expect(`${name} ${mode}`).toBe(`${name} ${isDirectory ? '750' : '640'}`);
    }
  });
});
