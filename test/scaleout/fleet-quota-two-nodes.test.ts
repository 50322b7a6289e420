/**
 * One quota for an owner and its host accounts across nodes (docs/operations.md#fleets): two real `coffer serve`
 * processes on one PostgreSQL schema with COFFER_QUOTA_PRO=10000. Four host accounts of one owner upload 3,000 bytes
 * each at the same time, half through each node: each fits alone, not all together. The reservations are taken under
 * the owner's row lock in the database (not the host account's, not a node's memory), so exactly three are stored and
 * the fourth is refused with 413 upload_exceeds_quota before anything of it is stored; the fleet never holds more than
 * the quota.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyService } from '../../src/services/keys.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import { api, envelope, slowUpload } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { tempDir } from '../helpers/tmp.js';

const QUOTA = 10_000;
const HOSTS = 4;
const ROUNDS = 3;

describe.skipIf(skipPg)('one quota for a fleet of host accounts on two Coffer nodes sharing one PostgreSQL', () => {
  let schema: TestSchema;
  const nodes: ServeNode[] = [];
  const fleets: { ownerId: string; hosts: { accountId: string; apiKey: string }[] }[] = [];

  const withStore = async <T>(work: (store: ReturnType<typeof openPostgresStores>) => Promise<T>): Promise<T> => {
    const store = openPostgresStores(schema.url);
    try {
      return await work(store);
    } finally {
      await store.database.close();
    }
  };

  beforeAll(async () => {
    requirePg();
    assertBuilt();
    schema = await createTestSchema('coffer_fleet_quota');
    const owners = await withStore(async (store) => {
      await store.database.migrate();
      const service = new KeyService(store, { now: () => Date.now() });
      const made = [];
      for (let round = 0; round < ROUNDS; round++) {
        const account = await service.createAccount('pro');
        made.push({ ownerId: account.id, apiKey: (await service.issueKey(account)).apiKey });
      }
      return made;
    });
    const env = {
      COFFER_DATABASE_URL: schema.url,
      COFFER_DATA_DIR: tempDir('coffer-fleet-quota-blobs-'),
      COFFER_QUOTA_PRO: String(QUOTA),
    };
    nodes.push(...(await Promise.all([startServeNode('a', env), startServeNode('b', env)])));
    for (const { apiKey } of owners) {
      expect((await api(nodes[0]!.url, apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    }
    // The host accounts, as `coffer admin accounts add-host` makes them (a copy of the owner's vault, a write-only key).
    await withStore(async (store) => {
      const service = new KeyService(store, { now: () => Date.now() }, undefined, { pro: QUOTA });
      for (const { ownerId } of owners) {
        const hosts = [];
        for (let i = 0; i < HOSTS; i++) {
          const issued = await service.addHost(ownerId, { label: `host-${i}` });
          hosts.push({ accountId: issued.account.id, apiKey: issued.apiKey });
        }
        fleets.push({ ownerId, hosts });
      }
    });
  }, 60_000);

  afterAll(async () => {
    for (const node of nodes) node.child.kill('SIGKILL');
    await Promise.all(nodes.map((node) => exited(node.child)));
    await schema?.drop();
  });

  it(`${HOSTS} host accounts of one owner uploading at once on both nodes: three stored, one refused, never over the quota`, async () => {
    for (const { ownerId, hosts } of fleets) {
      const node = (i: number) => nodes[i % 2]!;
      const slots = await Promise.all(
        hosts.map(async ({ apiKey }, i) => {
          const created = await api(node(i).url, apiKey)('POST', '/api/backups');
          expect(created.status).toBe(201);
          return created.body.backupId as string;
        }),
      );
      const responses = await Promise.all(
        hosts.map(({ apiKey }, i) => slowUpload(node(i).url, apiKey, slots[i]!, Buffer.alloc(3000, i + 1), 400)),
      );
      expect(responses.map((r) => r.status).sort()).toEqual([201, 201, 201, 413]);
      expect(responses.find((r) => r.status === 413)!.body).toMatchObject({
        code: 'upload_exceeds_quota',
        details: { quota: QUOTA, usage: 9000, uploadBytes: 3000 },
      });
      // The database's count of the fleet: the three stored uploads, no reservation left over.
      expect((await withStore((store) => store.usage.fleetUsage(Date.now(), ownerId)))!.storedBytes).toBe(9000);
    }
  });
});
