/**
 * Scale-out: two real `coffer serve` processes on one PostgreSQL (own schema) and one S3 endpoint (s3rver, and
 * Ceph's RADOS Gateway).
 * - 12 concurrent creates for one account, spread over both nodes: exactly one 201 (the database decides);
 * - a finalize on node A reaches an EventSource held on node B (LISTEN/NOTIFY; how fast is bench/'s question);
 * - node A killed (SIGKILL) mid-upload: no READY record, and after a sweep no orphan object and no
 *   incomplete multipart upload, while live blobs stay.
 * Each test makes the accounts and backups it needs (on the shared nodes), so any one of them runs alone (`-t`).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { Readable } from 'node:stream';
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { composeParts, type Parts } from '../../src/server/compose.js';
import { KeyService } from '../../src/services/keys.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { assertBuilt } from '../helpers/built.js';
import { hangGuard } from '../helpers/bounds.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { tempDir } from '../helpers/tmp.js';

const MiB = 1024 * 1024;

for (const engine of S3_ENGINES)
  describe.skipIf(skipPg || skipEngine(engine))(`two Coffer nodes on one PostgreSQL and one S3 endpoint (${engine})`, () => {
    let s3: TestS3;
    let schema: TestSchema;
    let env: Record<string, string>;
    let a: ServeNode;
    let b: ServeNode;
    let keyService: KeyService;
    let closeStore: () => Promise<void>;
    const nodes: ServeNode[] = [];

    /** A new account on the shared database, its vault made through `node`: its API key. */
    async function newAccount(node: ServeNode): Promise<string> {
      const { apiKey } = await keyService.issueKey(await keyService.createAccount('pro'));
      expect((await api(node.url, apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
      return apiKey;
    }

    /** A READY backup of `key`'s account, uploaded and finalized through `node`: its id and bytes. */
    async function readyBackup(node: ServeNode, key: string): Promise<{ id: string; data: Buffer }> {
      const call = api(node.url, key);
      const created = await call('POST', '/api/backups');
      expect(created.status).toBe(201);
      const id = created.body.backupId as string;
      const data = randomBytes(6 * MiB); // two S3 parts
      const headers = { 'content-type': 'application/octet-stream' };
      expect((await call('POST', `/api/backups/upload?backupId=${id}`, { body: data, headers })).status).toBe(201);
      expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
      return { id, data };
    }

    beforeAll(async () => {
      requirePg();
      assertBuilt();
      s3 = await startS3(engine);
      schema = await createTestSchema('coffer_nodes');
      env = { ...s3.env, COFFER_DATABASE_URL: schema.url };
      // An account exists before the nodes start (so neither runs the first-start bootstrap).
      const store = openPostgresStores(schema.url);
      await store.database.migrate();
      keyService = new KeyService(store, { now: () => Date.now() });
      closeStore = () => store.database.close();
      await keyService.createAccount('pro');
      [a, b] = await Promise.all([startServeNode('a', env), startServeNode('b', env)]);
      nodes.push(a, b);
    }, hangGuard(40_000));

    afterAll(async () => {
      for (const node of nodes) if (/"level":(40|50|60)/.test(node.output())) console.warn(`node ${node.name} logged:\n${node.output()}`);
      for (const node of nodes) node.child.kill('SIGKILL');
      await Promise.all(nodes.map((node) => exited(node.child)));
      await closeStore?.();
      await s3?.close();
      await schema?.drop();
    });

    it('12 concurrent creates for one account, spread over both nodes, give exactly one 201', async () => {
      const key = await newAccount(a);
      const responses = await Promise.all(
        Array.from({ length: 12 }, (_, i) => api((i % 2 === 0 ? a : b).url, key)('POST', '/api/backups')),
      );
      const created = responses.filter((r) => r.status === 201);
      expect(created).toHaveLength(1);
      const refused = responses.filter((r) => r.status === 409);
      expect(refused).toHaveLength(11);
      for (const r of refused) {
        expect(r.body).toMatchObject({ code: 'upload_in_progress', details: { backupId: created[0]!.body.backupId } });
      }
    });

    it('a finalize on node A reaches an EventSource on node B', async () => {
      const key = await newAccount(a);
      const created = await api(a.url, key)('POST', '/api/backups');
      expect(created.status).toBe(201);
      const id = created.body.backupId as string;
      const data = randomBytes(6 * MiB); // two S3 parts
      const uploaded = await api(b.url, key)('POST', `/api/backups/upload?backupId=${id}`, {
        body: data,
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(uploaded.status).toBe(201);

      const source = new EventSource(`${b.url}/api/backups/${id}/events`, {
        fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${key}` } }),
      });
      const statuses: string[] = [];
      const closed = new Promise<{ reason: string; status: string }>((resolve) =>
        source.addEventListener('backup.stream.closed', (event) => resolve(JSON.parse(event.data))),
      );
      const firstFrame = new Promise<void>((resolve) =>
        source.addEventListener('backup.status', (event) => {
          statuses.push(JSON.parse(event.data).status);
          resolve();
        }),
      );
      // A hang guard (the event arrives or the test says it did not), not a latency check: that is bench/'s.
      let guard: NodeJS.Timeout | undefined;
      const bound = hangGuard(20_000);
      const never = new Promise<never>((_, reject) => {
        guard = setTimeout(() => reject(new Error(`no frame on node B within ${bound} ms; frames so far: ${statuses.join(', ')}`)), bound);
      });
      try {
        await Promise.race([firstFrame, never]);
        expect(statuses[0]).toBe('UPLOADED');
        const ready = await api(a.url, key)('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(data.length) });
        expect(ready.status).toBe(200);
        expect(await Promise.race([closed, never])).toMatchObject({ reason: 'terminal', status: 'READY' });
        expect(statuses).toEqual(['UPLOADED', 'READY']);
      } finally {
        clearTimeout(guard);
        source.close();
      }

      // Either node serves the same bytes from the shared object store.
      for (const node of [a, b]) {
        const content = await fetch(`${node.url}/api/backups/${id}/content`, { headers: { authorization: `Bearer ${key}` } });
        expect(Buffer.from(await content.arrayBuffer()).equals(data)).toBe(true);
      }
    });

    it('node A killed mid-upload: no READY record, and after a sweep no orphan object or part remains', async () => {
      // A node of this test's own to kill; A and B serve the others.
      const doomed = await startServeNode('doomed', env);
      nodes.push(doomed);
      const key = await newAccount(doomed);
      // A live backup (of another account) whose ciphertext the sweep must keep.
      const live = await readyBackup(b, await newAccount(b));
      const callA = api(doomed.url, key);
      const created = await callA('POST', '/api/backups');
      expect(created.status).toBe(201);
      const { backupId: id, blobPath } = created.body as { backupId: string; blobPath: string };

      // A chunked upload to A that sends 12 MiB (S3 parts start flowing) and then waits.
      const request = http.request(`${doomed.url}/api/backups/upload?backupId=${id}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
      });
      request.on('error', () => undefined);
      request.write(randomBytes(12 * MiB));
      const deadline = Date.now() + hangGuard(10_000);
      const partsStored = async () => {
        for (const upload of await s3.incompleteUploads()) if ((await s3.storedParts(upload)).length > 0) return true;
        return false;
      };
      while (!(await partsStored())) {
        if (Date.now() > deadline) throw new Error('no multipart upload started on S3');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      doomed.child.kill('SIGKILL');
      await exited(doomed.child);
      request.destroy();

      // ServeNode B sees the slot still pending: nothing became READY.
      const record = await api(b.url, key)('GET', `/api/backups/${id}`);
      expect(record.body.status).toBe('PENDING_UPLOAD');
      expect(await s3.incompleteUploads()).toHaveLength(1);

      // A blob stored by an attempt whose node died before recording it: an orphan object.
      const sweeperParts: Parts = await composeParts(
        loadConfig({ ...env, COFFER_DATA_DIR: tempDir('coffer-sweeper-') }),
        new ManualClock(Date.now() + 2 * 3_600_000), // the slot's upload window has passed
        { sweeper: { orphanGraceMs: 0 } },
      );
      try {
        const stray = `${blobPath}/${'0'.repeat(8)}-0000-7000-8000-${'0'.repeat(12)}.bin`;
        await sweeperParts.blobs.put(stray, Readable.from([randomBytes(1000)]));
        const before = await objects(sweeperParts);
        expect(before).toContain(stray);

        const report = await sweeperParts.sweeper.runOnce({ orphans: true });
        expect(report.ran).toBe(true);
        expect(report.orphans).toBeGreaterThanOrEqual(1);
        expect(report.incomplete).toBe(1);

        const after = await objects(sweeperParts);
        expect(after.filter((k) => k.startsWith(`${blobPath}/`))).toEqual([]);
        expect(await s3.incompleteUploads()).toEqual([]);
        // The live backup keeps its ciphertext.
        expect(after.some((k) => k.includes(live.id))).toBe(true);
        const final = await sweeperParts.stores.backups.getBackup(id);
        expect(final?.status).toBe('DELETED');
      } finally {
        await sweeperParts.close();
      }
      // ServeNode B keeps serving.
      expect((await api(b.url, key)('GET', '/api/backups')).status).toBe(200);
    });

    it('one node sweeps at a time: while one holds the advisory lock, another skips its sweep', async () => {
      const open = () => composeParts(loadConfig({ ...env, COFFER_DATA_DIR: tempDir('coffer-sweeper-') }));
      const [first, second] = await Promise.all([open(), open()]);
      try {
        const held = await first.stores.database.tryExclusive('sweeper', () => second.sweeper.runOnce());
        expect(held).toEqual({ ran: true, value: { ran: false, moved: 0, sessions: 0, orphans: 0, incomplete: 0, vaultHistory: 0 } });
        expect((await second.sweeper.runOnce()).ran).toBe(true);
      } finally {
        await Promise.all([first.close(), second.close()]);
      }
    });

    async function objects(parts: Parts): Promise<string[]> {
      const out: string[] = [];
      for await (const entry of parts.blobs.list('backups/')) out.push(entry.key);
      return out;
    }
  });
