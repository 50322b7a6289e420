/**
 * Several Coffer databases side by side as PostgreSQL schemas of one database (an operator's choice, and how
 * concurrent test runs work): each migrates and keeps its own tables, whatever the other schemas hold.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openPostgresStores } from '../../src/store/postgres.js';
import type { Stores } from '../../src/store/ports/stores.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';

describe.skipIf(skipPg)('PostgreSQL store in one schema of a shared database', () => {
  const schemas: TestSchema[] = [];
  const stores: Stores[] = [];
  afterAll(async () => {
    await Promise.all(stores.map((store) => store.database.close()));
    await Promise.all(schemas.map((schema) => schema.drop()));
  });

  it('migrates when another schema already holds migrated Coffer tables', async () => {
    requirePg();
    for (const prefix of ['coffer_first', 'coffer_second']) {
      const schema = await createTestSchema(prefix);
      schemas.push(schema);
      const store = openPostgresStores(schema.url);
      stores.push(store);
      await store.database.migrate();
    }
    const [first, second] = stores as [Stores, Stores];
    await second.accounts.createAccount({
      id: '0193a0b0-0000-7000-8000-000000000001',
      plan: 'free',
      createdAt: 0,
      lastReadyCreatedAt: null,
    });
    expect(await second.accounts.getAccount('0193a0b0-0000-7000-8000-000000000001')).toBeDefined();
    expect(await first.accounts.getAccount('0193a0b0-0000-7000-8000-000000000001')).toBeUndefined();
    await second.database.migrate(); // a second start finds its own bookkeeping
  });
});
