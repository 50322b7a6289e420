/**
 * The filesystem store is opened by more than one process on the same data directory: the server, every
 * `coffer admin` command that needs blobs, and the nodes of a scale-out on a shared directory. Opening a store must
 * not disturb an upload that another one is writing, and neither may a sweep, whatever the orphan grace
 * (COFFER_ORPHAN_GRACE=0s included): a temp file names its writer (process, store, host), and removeIncomplete takes
 * only those whose writer is gone, or, for another live process or host, those untouched for FOREIGN_TEMP_FLOOR_MS.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FOREIGN_TEMP_FLOOR_MS, FsBlobStore } from '../../src/blobs/fs.js';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { tempDir } from '../helpers/tmp.js';

const tmpFiles = (root: string) => fs.readdirSync(path.join(root, 'tmp'));

it('opening a second store on the same directory leaves an upload in flight intact', async () => {
  const root = tempDir('coffer-blobs-shared-');
  const server = new FsBlobStore(root);
  const body = new PassThrough();
  const first = Buffer.alloc(64 * 1024, 1);
  const rest = Buffer.alloc(64 * 1024, 2);
  const put = server.put('backups/a/b/blob.bin', body);
  body.write(first);
  await expect.poll(() => tmpFiles(root).length).toBe(1);

  new FsBlobStore(root); // what `coffer admin backups undelete` does while the server runs

  expect(tmpFiles(root)).toHaveLength(1);
  body.end(rest);
  await expect(put).resolves.toEqual({ size: first.length + rest.length, version: null, lockedUntil: null });
  expect(await buffer(await server.get('backups/a/b/blob.bin'))).toEqual(Buffer.concat([first, rest]));
});

it('a sweep with no grace takes no temp file being written, its own or another live writer’s', async () => {
  const root = tempDir('coffer-blobs-writing-');
  const writer = new FsBlobStore(root);
  const body = new PassThrough();
  const put = writer.put('backups/a/b/blob.bin', body);
  body.write(Buffer.alloc(1024, 1));
  await expect.poll(() => tmpFiles(root).length).toBe(1);

  expect(await writer.removeIncomplete(Date.now() + 60_000)).toBe(0);
  expect(await new FsBlobStore(root).removeIncomplete(Date.now() + 60_000)).toBe(0);

  body.end(Buffer.alloc(1024, 2));
  await expect(put).resolves.toEqual({ size: 2048, version: null, lockedUntil: null });
  expect(tmpFiles(root)).toEqual([]);
});

it('a temp file whose writer was killed is removed by removeIncomplete, not by opening the store', { timeout: 60_000 }, async () => {
  assertBuilt();
  const root = tempDir('coffer-blobs-crash-');
  // A process that starts an upload into the store and is killed in the middle of it (a crash).
  const writer = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { FsBlobStore } = await import(${JSON.stringify(path.resolve('dist/blobs/fs.js'))});
       const { PassThrough } = await import('node:stream');
       const body = new PassThrough();
       void new FsBlobStore(process.argv[1]).put('backups/a/b/blob.bin', body);
       body.write(Buffer.alloc(1024, 1));`,
      root,
    ],
    { stdio: 'ignore' },
  );
  await expect.poll(() => fs.existsSync(path.join(root, 'tmp')) && tmpFiles(root).length, { timeout: 30_000 }).toBe(1);
  writer.kill('SIGKILL');
  await exited(writer);
  const [leftover] = tmpFiles(root);
  expect(leftover).toMatch(new RegExp(`^${writer.pid}\\.`));

  const store = new FsBlobStore(root);
  expect(tmpFiles(root)).toEqual([leftover]);
  expect(await store.removeIncomplete(Date.now() - 3_600_000)).toBe(0); // younger than the grace: kept
  expect(await store.removeIncomplete(Date.now() + 60_000)).toBe(1);
  expect(tmpFiles(root)).toEqual([]);
});

it('a temp file of another host, or of an unknown writer, goes only once untouched for the floor', async () => {
  const root = tempDir('coffer-blobs-foreign-');
  const store = new FsBlobStore(root);
  const otherHost = `${process.pid}.0123456789abcdef.00000000-0000-4000-8000-000000000000.another-host`;
  for (const name of [otherHost, 'unnamed-by-an-older-version']) fs.writeFileSync(path.join(root, 'tmp', name), 'partial');

  expect(await store.removeIncomplete(Date.now() + 60_000)).toBe(0);
  const longAgo = new Date(Date.now() - FOREIGN_TEMP_FLOOR_MS - 60_000);
  for (const name of tmpFiles(root)) fs.utimesSync(path.join(root, 'tmp', name), longAgo, longAgo);
  expect(await store.removeIncomplete(Date.now() + 60_000)).toBe(2);
  expect(tmpFiles(root)).toEqual([]);
});

describe.skipIf(skipPg)('two nodes on one data directory (PostgreSQL, COFFER_ORPHAN_GRACE=0s)', () => {
  const METRICS_TOKEN = 'shared-fs-metrics-token-0123456789';
  let schema: TestSchema;
  const nodes: ServeNode[] = [];

  beforeAll(async () => {
    requirePg();
    assertBuilt();
    schema = await createTestSchema('coffer_shared_fs');
  });

  afterAll(async () => {
    for (const node of nodes) node.child.kill('SIGKILL');
    await Promise.all(nodes.map((node) => exited(node.child)));
    await schema?.drop();
  });

  /** The node's sweeps that ran to the end (its start-up sweep is the first). */
  async function sweeps(node: ServeNode): Promise<number> {
    const text = await (await fetch(`${node.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    return Number(/coffer_sweeper_runs_total\{outcome="ok"\} (\d+)/.exec(text)?.[1] ?? 0);
  }

  it('a node starting (and sweeping) while another uploads slowly leaves that upload intact', { timeout: 180_000 }, async () => {
    const dataDir = tempDir('coffer-shared-fs-');
    const env = {
      COFFER_DATABASE_URL: schema.url,
      COFFER_DATA_DIR: dataDir,
      COFFER_ORPHAN_GRACE: '0s',
      COFFER_METRICS_TOKEN: METRICS_TOKEN,
    };
    const writer = await startServeNode('shared-fs-writer', env);
    nodes.push(writer);
    const apiKey = /API key \(shown once, store it now\): (cfk_\S+)/.exec(writer.output())![1]!;
    const call = api(writer.url, apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const backupId = (await call('POST', '/api/backups')).body.backupId as string;

    // A slow client: the first half now, the rest only once the other node has swept.
    const data = Buffer.alloc(256 * 1024, 7);
    let uploadRest = () => {};
    const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const request = http.request(
        `${writer.url}/api/backups/upload?backupId=${backupId}`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/octet-stream', 'content-length': data.length },
        },
        (reply) => {
          let text = '';
          reply.on('data', (chunk: Buffer) => (text += chunk));
          reply.on('end', () => resolve({ status: reply.statusCode!, text }));
        },
      );
      request.on('error', reject);
      request.write(data.subarray(0, data.length / 2));
      uploadRest = () => request.end(data.subarray(data.length / 2));
    });
    await expect.poll(() => tmpFiles(dataDir).length, { timeout: 30_000 }).toBe(1);
    const [inFlight] = tmpFiles(dataDir);

    const newcomer = await startServeNode('shared-fs-newcomer', env);
    nodes.push(newcomer);
    await expect.poll(() => sweeps(newcomer), { timeout: 120_000, interval: 200 }).toBeGreaterThan(0);

    expect(tmpFiles(dataDir)).toEqual([inFlight]);
    uploadRest();
    const uploaded = await response;
    expect(uploaded.status, uploaded.text).toBe(201);
    expect((await call('POST', `/api/backups/${backupId}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
    const content = await api(newcomer.url, apiKey)('GET', `/api/backups/${backupId}/content`);
    expect(content.status).toBe(200);
    expect(content.raw.equals(data)).toBe(true);
  });
});
