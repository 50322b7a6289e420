/**
 * Presigned S3 transfers through the real CLI (its SDK) against a real server with COFFER_S3_PRESIGNED=on, on
 * PostgreSQL + s3rver and + Ceph's RADOS Gateway (docs/upload-protocols.md#s3-presigned, docs/sdk.md):
 *  - a backup of several parts (sent in parallel) and a one-PUT backup restore and verify byte for byte, and Coffer
 *    moved none of their bytes (/metrics: no byte stored by a direct upload, no request of /content);
 *  - a server that does not announce the extension: the server's way, as before;
 *  - a store that the client cannot reach (COFFER_S3_PUBLIC_ENDPOINT on a closed port): the backup and the restore
 *    still go through, the server's way;
 *  - a part whose connection breaks mid-body is sent again; an expired URL (COFFER_S3_URL_LIFETIME=1s and a store
 *    reached only after 2 s) is signed again: both through a TCP proxy in front of the store;
 *  - an upload over the quota: the server's refusal, as the direct path shows it.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PART_ATTEMPTS, PART_BYTES, PARTS_IN_FLIGHT, uploadPresigned } from '../../src/client/presigned-upload.js';
import { connect } from '../../src/client/index.js';
import { CofferClient } from '../../src/client/sdk.js';
import { envelope } from '../helpers/api.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, snapshot } from './helpers.js';

const MiB = 1024 * 1024;
const METRICS_TOKEN = 'presigned-transfers-metrics-token';
const PASSPHRASE = 'presigned passphrase';

/** What /metrics says Coffer moved: ciphertext stored by direct uploads, and the requests of each route. */
async function moved(server: TestServer): Promise<{ uploadBytes: number; requests: (route: string, method?: string) => number }> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const uploadBytes = Number(/^coffer_upload_bytes_total (\d+)/m.exec(text)?.[1] ?? NaN);
  const requests = (route: string, method = 'GET') =>
    text
      .split('\n')
      .filter(
        (line) =>
          line.startsWith('coffer_http_requests_total{') && line.includes(`route="${route}"`) && line.includes(`method="${method}"`),
      )
      .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
  return { uploadBytes, requests };
}

/** A tree with one file of `bytes` random (incompressible) bytes and a small text file. */
function tree(root: string, name: string, bytes: number): string {
  const dir = path.join(root, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'random.bin'), randomBytes(bytes));
  fs.writeFileSync(path.join(dir, 'note.txt'), `the ${name} tree\n`);
  return dir;
}

/** A fresh account (pro plan: no cadence between its first backups) with an initialized vault; its CLI. */
async function account(server: TestServer, extra: Record<string, string> = {}) {
  const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
  const cli = cliFor(server.url, apiKey, PASSPHRASE, extra);
  const init = await cli(['init']);
  expect(init.code, init.stderr).toBe(0);
  return { cli, accountId, apiKey };
}

/** Backs up `dir`, restores it into a new directory, verifies it: the tree comes back the same. */
async function roundTrip(cli: Awaited<ReturnType<typeof account>>['cli'], dir: string, work: string) {
  const backup = await cli(['backup', dir, '--json']);
  expect(backup.code, backup.stderr).toBe(0);
  const detail = json(backup);
  expect(detail.status).toBe('READY');
  const target = path.join(work, `restored-${detail.id}`);
  const restore = await cli(['restore', detail.id, target]);
  expect(restore.code, restore.stderr).toBe(0);
  expect(await snapshot(target)).toEqual(await snapshot(dir));
  const verify = await cli(['verify', detail.id]);
  expect(verify.code, verify.stderr).toBe(0);
  return { detail, backupStderr: backup.stderr, restoreStderr: restore.stderr };
}

/**
 * A TCP proxy in front of the store: `connection(n)` (n from 1) says whether to hold connection n `delayMs` before
 * forwarding anything. `cutPartAfter`: the first request that PUTs a multipart part is cut once that many of its
 * bytes went upstream, whichever connection carries it (the client's pool may reuse one connection for every part).
 * `cutDownloadAfter`: the first download is cut once that many bytes came back.
 */
async function storeProxy(
  port: number,
  connection: (n: number) => { delayMs?: number },
  { cutPartAfter, cutDownloadAfter }: { cutPartAfter?: number; cutDownloadAfter?: number } = {},
) {
  let partCut = false;
  let downloadCut = false;
  const sockets = new Set<net.Socket>();
  let count = 0;
  const events: string[] = [];
  const server = net.createServer((client) => {
    const plan = connection(++count);
    const number = count;
    const upstream = net.connect(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pause();
    let carried = 0;
    let partStartedAt: number | undefined;
    client.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1');
      if (/\r\nrange: bytes=[1-9]/i.test(text)) events.push(`range ${number}`);
      if (partStartedAt === undefined && /^PUT [^ ]*[?&]partNumber=\d/m.test(text)) partStartedAt = carried + text.search(/^PUT /m);
      carried += chunk.length;
      if (cutPartAfter !== undefined && !partCut && partStartedAt !== undefined && carried - partStartedAt > cutPartAfter) {
        partCut = true;
        events.push(`cut part ${number}`);
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      if (!upstream.write(chunk)) {
        client.pause();
        upstream.once('drain', () => client.resume());
      }
    });
    let down = 0;
    upstream.on('data', (chunk: Buffer) => {
      down += chunk.length;
      if (cutDownloadAfter !== undefined && !downloadCut && down > cutDownloadAfter) {
        downloadCut = true;
        events.push(`cut download ${number}`);
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      if (!client.write(chunk)) {
        upstream.pause();
        client.once('drain', () => upstream.resume());
      }
    });
    if (plan.delayMs) events.push(`held ${number}`);
    setTimeout(() => client.resume(), plan.delayMs ?? 0);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    events,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A loopback port that nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

for (const engine of S3_ENGINES) {
  describe.skipIf(skipPg || skipEngine(engine))(`presigned transfers through the CLI (postgres + ${engine})`, { timeout: 240_000 }, () => {
    let s3: TestS3;
    let schema: TestSchema;
    let server: TestServer;
    let work: string;

    beforeAll(async () => {
      assertBuilt();
      requirePg();
      work = tempDir('coffer-presigned-');
      s3 = await startS3(engine);
      schema = await createTestSchema('coffer_presigned_cli');
      server = await startTestServer({
        env: { ...s3.env, COFFER_DATABASE_URL: schema.url, COFFER_S3_PRESIGNED: 'on', COFFER_METRICS_TOKEN: METRICS_TOKEN },
      });
    });
    afterAll(async () => {
      await server?.stop();
      await s3?.close();
      await schema?.drop();
    });

    it('backs up (parts in parallel; one PUT) and restores through the store: Coffer moves no archive byte', async () => {
      const before = await moved(server);
      const { cli, apiKey } = await account(server);
      const big = await roundTrip(cli, tree(work, 'big', 30 * MiB), work);
      expect(big.detail.ciphertextSizeBytes).toBeGreaterThan(PARTS_IN_FLIGHT * PART_BYTES); // more parts than are sent at once
      const small = await roundTrip((await account(server)).cli, tree(work, 'small', 100_000), work);
      expect(small.detail.ciphertextSizeBytes).toBeLessThan(MiB);
      for (const run of [big, small]) expect(run.backupStderr + run.restoreStderr).toBe('');
      const after = await moved(server);
      expect(after.uploadBytes).toBe(before.uploadBytes); // no byte came by a direct upload
      expect(after.requests('/api/backups/:id/content')).toBe(before.requests('/api/backups/:id/content'));
      // restore and verify of each: from the store, each under a URL of its own
      expect(after.requests('/api/backups/:id/content-url') - before.requests('/api/backups/:id/content-url')).toBe(4);
      // The SDK's application API reads from the store as well, and writes to it.
      const vault = await connect({ url: server.url, apiKey }).unlock({ passphrase: PASSPHRASE });
      expect((await vault.verify(big.detail.id as string)).id).toBe(big.detail.id);
      const read = await moved(server);
      expect(read.requests('/api/backups/:id/content')).toBe(after.requests('/api/backups/:id/content'));
      expect(read.requests('/api/backups/:id/content-url') - after.requests('/api/backups/:id/content-url')).toBe(1);
      vault.close();
      const writer = await connect({ url: server.url, apiKey: (await account(server)).apiKey }).unlock({ passphrase: PASSPHRASE });
      const bytes = randomBytes(3 * PART_BYTES + 12_345);
      const written = await writer.backup(bytes, { name: 'dump.bin' });
      expect((await writer.verify(written.id)).plaintextBytes).toBe(bytes.length);
      writer.close();
      const wrote = await moved(server);
      expect(wrote.uploadBytes).toBe(before.uploadBytes);
      expect(wrote.requests('/api/backups/:id/content')).toBe(before.requests('/api/backups/:id/content'));
      expect(await s3.incompleteUploads()).toEqual([]);
    });
  });
}

describe.skipIf(skipPg)(
  'presigned transfers through the CLI: fallbacks, retries, refusals (postgres + s3rver)',
  { timeout: 240_000 },
  () => {
    let s3: TestS3;
    let schema: TestSchema;
    let work: string;
    const servers: TestServer[] = [];
    const closers: (() => Promise<void>)[] = [];

    beforeAll(async () => {
      assertBuilt();
      requirePg();
      work = tempDir('coffer-presigned-fallback-');
      s3 = await startS3('s3rver');
      schema = await createTestSchema('coffer_presigned_fallback');
    });
    afterAll(async () => {
      for (const server of servers) await server.stop();
      for (const close of closers) await close();
      await s3?.close();
      await schema?.drop();
    });

    async function serve(env: Record<string, string>): Promise<TestServer> {
      const server = await startTestServer({
        env: { ...s3.env, COFFER_DATABASE_URL: schema.url, COFFER_METRICS_TOKEN: METRICS_TOKEN, ...env },
      });
      servers.push(server);
      return server;
    }

    it('a server that does not announce it (presigned off): the upload and the download go through Coffer as before', async () => {
      const server = await serve({ COFFER_S3_PRESIGNED: 'off' });
      const { cli } = await account(server);
      const dir = tree(work, 'off', 3 * MiB);
      const run = await roundTrip(cli, dir, work);
      const after = await moved(server);
      expect(after.uploadBytes).toBe(run.detail.ciphertextSizeBytes);
      expect(after.requests('/api/backups/:id/content')).toBe(2);
    });

    it('a store the client cannot reach (COFFER_S3_PUBLIC_ENDPOINT on a closed port): backup and restore go through Coffer', async () => {
      const port = await closedPort();
      const server = await serve({ COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: `http://127.0.0.1:${port}` });
      for (const size of [20 * MiB, 200_000]) {
        const { cli } = await account(server);
        const before = await moved(server);
        const run = await roundTrip(cli, tree(work, `unreachable-${size}`, size), work);
        expect(run.backupStderr).toContain(`cannot reach the store at http://127.0.0.1:${port}`);
        expect(run.backupStderr).toContain('uploading through the server instead');
        expect(run.backupStderr).not.toContain('X-Amz-'); // never a signed URL
        const after = await moved(server);
        expect(after.uploadBytes - before.uploadBytes).toBe(run.detail.ciphertextSizeBytes);
        expect(after.requests('/api/backups/:id/content') - before.requests('/api/backups/:id/content')).toBe(2);
      }
      expect(await s3.incompleteUploads()).toEqual([]);
    });

    it('a part whose connection breaks mid-body is signed and sent again; the backup completes through the store', async () => {
      const port = Number(new URL(s3.endpoint).port);
      // The first part sent to the store is cut after 3 MiB of it went up: in the middle of the part (PART_BYTES).
      const proxy = await storeProxy(port, () => ({}), { cutPartAfter: 3 * MiB });
      closers.push(proxy.close);
      const server = await serve({ COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: proxy.endpoint });
      const { cli } = await account(server);
      const run = await roundTrip(cli, tree(work, 'interrupted', 20 * MiB), work);
      expect(proxy.events.some((event) => event.startsWith('cut part'))).toBe(true);
      expect(run.backupStderr).toBe('');
      expect((await moved(server)).uploadBytes).toBe(0);
      expect(await s3.incompleteUploads()).toEqual([]);
    });

    it('a download from the store that breaks off is resumed there with Range (no byte through Coffer)', async () => {
      const port = Number(new URL(s3.endpoint).port);
      const proxy = await storeProxy(port, () => ({}), { cutDownloadAfter: 5 * MiB });
      closers.push(proxy.close);
      const server = await serve({ COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: proxy.endpoint });
      const { cli } = await account(server);
      const run = await roundTrip(cli, tree(work, 'resumed', 12 * MiB), work);
      expect(proxy.events.some((event) => event.startsWith('cut download'))).toBe(true);
      expect(proxy.events.some((event) => event.startsWith('range'))).toBe(true); // the rest asked of the store
      expect(run.restoreStderr).toMatch(/connection lost; resuming at byte \d+/);
      const after = await moved(server);
      expect(after.uploadBytes).toBe(0);
      expect(after.requests('/api/backups/:id/content')).toBe(0);
    });

    it('an expired URL (COFFER_S3_URL_LIFETIME=1s, the store reached 2.5 s later) is signed again', async () => {
      const port = Number(new URL(s3.endpoint).port);
      // The first connection of each kind is held 2.5 s: its request reaches the store after its URL expired.
      const proxy = await storeProxy(port, (n) => (n === 1 ? { delayMs: 2500 } : {}));
      closers.push(proxy.close);
      const server = await serve({ COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: proxy.endpoint, COFFER_S3_URL_LIFETIME: '1s' });
      const { cli } = await account(server);
      const run = await roundTrip(cli, tree(work, 'expired', 20 * MiB), work);
      expect(proxy.events).toContain('held 1');
      expect(run.backupStderr).toBe('');
      expect((await moved(server)).uploadBytes).toBe(0);
    });

    it('a store that answers no ETag, or only 500s: a clear error after a bounded number of sendings, the slot freed', async () => {
      let mode: 'no-etag' | 'error' = 'no-etag';
      const puts: string[] = [];
      const store = http.createServer((request, response) => {
        request.resume();
        request.on('end', () => {
          puts.push(`${request.method} ${request.headers['content-length']}`);
          if (mode === 'no-etag') response.writeHead(200).end();
          else response.writeHead(500, { 'content-type': 'application/xml' }).end('<Error><Code>InternalError</Code></Error>');
        });
      });
      await new Promise<void>((resolve) => store.listen(0, '127.0.0.1', resolve));
      closers.push(() => new Promise<void>((resolve) => store.close(() => resolve())));
      const endpoint = `http://127.0.0.1:${(store.address() as AddressInfo).port}`;
      const server = await serve({ COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: endpoint });
      for (const [which, size] of [
        ['no-etag', 20 * MiB],
        ['error', 20 * MiB],
        ['error', 100_000],
      ] as const) {
        mode = which;
        puts.length = 0;
        const { cli } = await account(server);
        const result = await cli(['backup', tree(work, `hostile-${which}-${size}`, size)]);
        expect(result.code).toBe(1);
        if (which === 'no-etag') expect(result.stderr).toMatch(new RegExp(`the store at ${endpoint} took part \\d+ but answered no ETag`));
        else
          expect(result.stderr).toMatch(
            new RegExp(`the store at ${endpoint} refused (part \\d+|the upload) with HTTP 500 \\(InternalError\\)`),
          );
        expect(result.stderr).not.toContain('X-Amz-');
        expect(result.stderr).toMatch(/deleted the upload slot/);
        // Never more than every part in flight sent its attempts: no endless loop.
        expect(puts.length).toBeGreaterThan(0);
        expect(puts.length).toBeLessThanOrEqual(PARTS_IN_FLIGHT * MAX_PART_ATTEMPTS);
        const listed = json(await cli(['list', '--json']));
        expect(listed.backups).toEqual([]);
      }
      expect(await s3.incompleteUploads()).toEqual([]);
    });

    it('the SDK: a stream of one byte, of exactly one or two parts, or one byte over, is stored whole (no empty part signed)', async () => {
      const server = await serve({ COFFER_S3_PRESIGNED: 'on' });
      for (const size of [1, PART_BYTES, PART_BYTES + 1, 2 * PART_BYTES]) {
        const { apiKey } = await server.newKey({ plan: 'pro' });
        const client = new CofferClient({ baseUrl: server.url, apiKey });
        await client.bootstrap(envelope() as Parameters<CofferClient['bootstrap']>[0]);
        const { slot, presignedUpload } = await client.openSlot();
        expect(presignedUpload).toBe(true);
        const bytes = randomBytes(size);
        // Pieces of an odd size, so that part boundaries fall inside them.
        const pieces = Array.from({ length: Math.ceil(size / 1_000_003) }, (_, i) => bytes.subarray(i * 1_000_003, (i + 1) * 1_000_003));
        const outcome = await uploadPresigned(client, slot.backupId, Readable.from(pieces), { maxBytes: 64 * MiB });
        expect(outcome).toEqual({ uploaded: true, size });
        const detail = await client.getBackup(slot.backupId);
        expect(detail.status).toBe('UPLOADED');
      }
      expect(await s3.incompleteUploads()).toEqual([]);
    });

    it('an upload over the quota: the server refusal (upload_exceeds_quota) as on the direct path, nothing stored', async () => {
      const QUOTA = 1_000_000;
      const server = await serve({ COFFER_S3_PRESIGNED: 'on' });
      for (const size of [1_500_000, 20 * MiB]) {
        const { cli, accountId } = await account(server);
        await server.parts.quotas.setQuota(accountId, QUOTA);
        const result = await cli(['backup', tree(work, `quota-${size}`, size)]);
        expect(result.stderr).toContain(
          `coffer: the server refused (upload_exceeds_quota): This upload does not fit in the quota: ${QUOTA} of ${QUOTA} bytes are left.`,
        );
        expect(result.code).toBe(1);
        const listed = json(await cli(['list', '--json']));
        expect(listed.backups.filter((b: { status: string }) => b.status === 'READY')).toEqual([]);
      }
      expect(await s3.incompleteUploads()).toEqual([]);
    });
  },
);
