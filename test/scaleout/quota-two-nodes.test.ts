/**
 * Storage quotas across nodes (docs/api-rules.md#quota): two real `coffer serve` processes on one PostgreSQL schema
 * with COFFER_QUOTA_PRO=10000. Two uploads of one account that each fit but not together, one on each node and in
 * flight at the same time, never both pass: the bytes are reserved in the database (the account's row lock), not in
 * a node's memory, so one is stored (201) and the other refused with 413 upload_exceeds_quota before anything of it
 * is stored, as test/api/quota.test.ts shows on one node. At the quota, a create is refused with 409 on either node.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyService } from '../../src/services/keys.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import { api, envelope, finalizeBody, slowUpload } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { tempDir } from '../helpers/tmp.js';

const QUOTA = 10_000;

const bytes = (size: number, seed: number) => Buffer.alloc(size, seed);

describe.skipIf(skipPg)('storage quota on two Coffer nodes sharing one PostgreSQL', () => {
  let schema: TestSchema;
  const nodes: ServeNode[] = [];
  const accounts: { accountId: string; apiKey: string }[] = [];

  /** Stored bytes as the database counts them (READY, UPLOADED, in grace, reserved by uploads in flight). */
  async function storedBytes(accountId: string): Promise<number> {
    const store = openPostgresStores(schema.url);
    try {
      const [row] = await store.usage.usage(Date.now(), accountId);
      return row!.storedBytes;
    } finally {
      await store.database.close();
    }
  }

  beforeAll(async () => {
    requirePg();
    assertBuilt();
    schema = await createTestSchema('coffer_quota');
    // Accounts exist before the nodes start (neither runs the first-start bootstrap).
    const store = openPostgresStores(schema.url);
    await store.database.migrate();
    const service = new KeyService(store, { now: () => Date.now() });
    for (let i = 0; i < 4; i++) {
      const account = await service.createAccount('pro');
      accounts.push({ accountId: account.id, apiKey: (await service.issueKey(account)).apiKey });
    }
    await store.database.close();
    // One blob directory for both (as one S3 bucket would be), one database.
    const env = { COFFER_DATABASE_URL: schema.url, COFFER_DATA_DIR: tempDir('coffer-quota-blobs-'), COFFER_QUOTA_PRO: String(QUOTA) };
    nodes.push(...(await Promise.all([startServeNode('a', env), startServeNode('b', env)])));
    for (const { apiKey } of accounts) {
      expect((await api(nodes[0]!.url, apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    }
  }, 60_000);

  afterAll(async () => {
    for (const node of nodes) node.child.kill('SIGKILL');
    await Promise.all(nodes.map((node) => exited(node.child)));
    await schema?.drop();
  });

  it('two uploads that each fit but not together, one on each node at once: one 201, one 413, nothing of it stored', async () => {
    const [a, b] = nodes as [ServeNode, ServeNode];
    for (const { accountId, apiKey } of accounts.slice(0, 3)) {
      const created = await api(a.url, apiKey)('POST', '/api/backups');
      expect(created.status).toBe(201);
      const id = created.body.backupId as string;
      const responses = await Promise.all([
        slowUpload(a.url, apiKey, id, bytes(6000, 1), 400),
        slowUpload(b.url, apiKey, id, bytes(6000, 2), 400),
      ]);
      expect(responses.map((r) => r.status).sort()).toEqual([201, 413]);
      expect(responses.find((r) => r.status === 413)!.body).toMatchObject({
        code: 'upload_exceeds_quota',
        details: { quota: QUOTA, usage: 6000, uploadBytes: 6000 },
      });
      // The reservations ended: what counts now is the one stored upload.
      expect(await storedBytes(accountId)).toBe(6000);
    }
  });

  it('at the quota, a create is refused with 409 quota_exceeded on either node', async () => {
    const [a, b] = nodes as [ServeNode, ServeNode];
    const { accountId, apiKey } = accounts[3]!;
    const id = (await api(a.url, apiKey)('POST', '/api/backups')).body.backupId as string;
    const uploaded = await api(b.url, apiKey)('POST', `/api/backups/upload?backupId=${id}`, {
      body: new Uint8Array(QUOTA),
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(uploaded.status).toBe(201);
    expect((await api(a.url, apiKey)('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(QUOTA) })).status).toBe(200);
    expect(await storedBytes(accountId)).toBe(QUOTA);
    for (const node of [a, b]) {
      const refused = await api(node.url, apiKey)('POST', '/api/backups');
      expect(refused.status, node.name).toBe(409);
      expect(refused.body).toMatchObject({ code: 'quota_exceeded', details: { quota: QUOTA, usage: QUOTA } });
    }
  });
});
