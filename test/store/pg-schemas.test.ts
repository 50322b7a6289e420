/**
 * Several Coffer databases side by side as PostgreSQL schemas of one database (an operator's choice, and how
 * concurrent test runs work): each migrates and keeps its own tables, whatever the other schemas hold.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres.js';
import type { SqlStore } from '../../src/store/sql-store.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';

describe.skipIf(skipPg)('PostgreSQL store in one schema of a shared database', () => {
  const schemas: TestSchema[] = [];
  const stores: SqlStore[] = [];
  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await Promise.all(schemas.map((schema) => schema.drop()));
  });

  it('migrates when another schema already holds migrated Coffer tables', async () => {
    requirePg();
    for (const prefix of ['coffer_first', 'coffer_second']) {
      const schema = await createTestSchema(prefix);
      schemas.push(schema);
      const store = openPostgresStore(schema.url);
      stores.push(store);
      await store.migrate();
    }
    const [first, second] = stores as [SqlStore, SqlStore];
    await second.createAccount({ id: '0193a0b0-0000-7000-8000-000000000001', plan: 'free', createdAt: 0, lastReadyCreatedAt: null });
    expect(await second.getAccount('0193a0b0-0000-7000-8000-000000000001')).toBeDefined();
    expect(await first.getAccount('0193a0b0-0000-7000-8000-000000000001')).toBeUndefined();
    await second.migrate(); // a second start finds its own bookkeeping
  });
});
