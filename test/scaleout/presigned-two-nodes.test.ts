/**
 * s3-presigned uploads on two real `coffer serve` nodes sharing one PostgreSQL schema and one bucket (s3rver, and
 * Ceph's RADOS Gateway), COFFER_QUOTA_PRO=10000: the sizes a client declares are reserved under the fleet owner's row
 * lock in the database when they are signed, so negotiations on both nodes at once cannot pass the quota together.
 * - Four host accounts of one owner each start a 3,000-byte single PUT at once, half on each node: three get a URL,
 *   one 413 upload_exceeds_quota; the three PUT their bytes and complete on the other node; the fleet stores 9,000.
 * - The owner, with 1,000 bytes left, signs four 400-byte parts of one multipart upload at once on both nodes: two
 *   are signed, two refused; abort (on the other node) ends every reservation.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyService } from '../../src/services/keys.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import { api, envelope } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';

const QUOTA = 10_000;
const HOSTS = 4;

for (const engine of S3_ENGINES) {
  describe.skipIf(skipPg || skipEngine(engine))(`s3-presigned on two Coffer nodes (postgres + ${engine})`, () => {
    let schema: TestSchema;
    let s3: TestS3;
    const nodes: ServeNode[] = [];
    let owner: { accountId: string; apiKey: string };
    let hosts: { accountId: string; apiKey: string }[] = [];

    const withStore = async <T>(work: (store: ReturnType<typeof openPostgresStores>) => Promise<T>): Promise<T> => {
      const store = openPostgresStores(schema.url);
      try {
        return await work(store);
      } finally {
        await store.database.close();
      }
    };
    const fleetUsage = () => withStore(async (store) => (await store.usage.fleetUsage(Date.now(), owner.accountId))!.storedBytes);

    beforeAll(async () => {
      requirePg();
      assertBuilt();
      s3 = await startS3(engine);
      schema = await createTestSchema('coffer_presigned_nodes');
      owner = await withStore(async (store) => {
        await store.database.migrate();
        const service = new KeyService(store, { now: () => Date.now() });
        const account = await service.createAccount('pro');
        return { accountId: account.id, apiKey: (await service.issueKey(account)).apiKey };
      });
      const env = { ...s3.env, COFFER_DATABASE_URL: schema.url, COFFER_QUOTA_PRO: String(QUOTA), COFFER_S3_PRESIGNED: 'on' };
      nodes.push(...(await Promise.all([startServeNode('a', env), startServeNode('b', env)])));
      expect((await api(nodes[0]!.url, owner.apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
      hosts = await withStore(async (store) => {
        const service = new KeyService(store, { now: () => Date.now() }, undefined, { pro: QUOTA });
        const made = [];
        for (let i = 0; i < HOSTS; i++) {
          const issued = await service.addHost(owner.accountId, { label: `host-${i}` });
          made.push({ accountId: issued.account.id, apiKey: issued.apiKey });
        }
        return made;
      });
    }, 60_000);

    afterAll(async () => {
      for (const node of nodes) node.child.kill('SIGKILL');
      await Promise.all(nodes.map((node) => exited(node.child)));
      await s3?.close();
      await schema?.drop();
    });

    const node = (i: number) => nodes[i % 2]!;
    const negotiate = (i: number, apiKey: string, type: string, payload: Record<string, unknown>) =>
      api(node(i).url, apiKey)('POST', '/api/backups/upload', { json: { type: `s3-presigned.${type}`, payload } });

    it(`${HOSTS} host accounts of one owner starting at once on both nodes: three signed, one refused, never over the quota`, async () => {
      const slots = await Promise.all(
        hosts.map(async ({ apiKey }, i) => {
          const created = await api(node(i).url, apiKey)('POST', '/api/backups');
          expect(created.status).toBe(201);
          expect(created.headers.get('coffer-extensions')).toBe('s3-presigned-upload');
          return created.body.backupId as string;
        }),
      );
      const starts = await Promise.all(hosts.map(({ apiKey }, i) => negotiate(i, apiKey, 'start', { backupId: slots[i], size: 3000 })));
      expect(starts.map((r) => r.status).sort()).toEqual([200, 200, 200, 413]);
      expect(starts.find((r) => r.status === 413)!.body).toMatchObject({
        code: 'upload_exceeds_quota',
        details: { quota: QUOTA, usage: 9000, uploadBytes: 3000 },
      });
      expect(await fleetUsage()).toBe(9000);
      // The signed ones upload and complete on the other node.
      for (const [i, start] of starts.entries()) {
        if (start.status !== 200) continue;
        const { request, uploadKey } = start.body;
        const stored = await fetch(request.url, { method: 'PUT', headers: request.headers, body: new Uint8Array(randomBytes(3000)) });
        expect(stored.status).toBe(200);
        const complete = await negotiate(i + 1, hosts[i]!.apiKey, 'complete', { backupId: slots[i], uploadKey, size: 3000 });
        expect(complete.status).toBe(200);
      }
      // The database's count of the fleet: the three uploads, no reservation left over.
      expect(await fleetUsage()).toBe(9000);
    });

    it('parts of one upload signed at once on both nodes: the quota holds; abort on the other node ends every reservation', async () => {
      // The fleet has 1,000 bytes left after the first test.
      const created = await api(nodes[0]!.url, owner.apiKey)('POST', '/api/backups');
      expect(created.status).toBe(201);
      const backupId = created.body.backupId as string;
      const start = await negotiate(0, owner.apiKey, 'start', { backupId });
      expect(start.status).toBe(200);
      const { uploadKey, uploadId } = start.body;
      const before = await fleetUsage();
      const parts = await Promise.all(
        [1, 2, 3, 4].map((partNumber) =>
          negotiate(partNumber, owner.apiKey, 'part', { backupId, uploadKey, uploadId, partNumber, size: 400 }),
        ),
      );
      // 1,000 bytes are left: two parts of 400 fit, not three.
      expect(parts.map((r) => r.status).sort()).toEqual([200, 200, 413, 413]);
      expect(await fleetUsage()).toBe(before + 800);
      const aborted = await negotiate(1, owner.apiKey, 'abort', { backupId, uploadKey, uploadId });
      expect(aborted.status).toBe(200);
      expect(await fleetUsage()).toBe(before);
      expect(await s3.incompleteUploads()).not.toContain(uploadId);
    });
  });
}
