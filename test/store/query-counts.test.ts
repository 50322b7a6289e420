/** The statement counters a benchmark (P4: database reads per second) and /metrics read from the Store. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStores } from '../../src/store/sqlite.js';
import { tempDir } from '../helpers/tmp.js';

describe('Store.queryCounts', () => {
  let store: Awaited<ReturnType<typeof openSqliteStores>>;
  beforeAll(async () => {
    store = await openSqliteStores(tempDir('coffer-counts-'));
  });
  afterAll(() => store.database.close());

  it('counts reads and writes separately, and returns a snapshot', async () => {
    await store.database.migrate();
    const before = store.database.queryCounts();
    await store.accounts.createAccount({ id: 'a1', plan: 'pro', createdAt: 1, lastReadyCreatedAt: null });
    await store.accounts.getAccount('a1');
    await store.accounts.getAccount('a1');
    await store.backups.getBackup('00000000-0000-7000-8000-000000000000');
    const after = store.database.queryCounts();
    expect(after.reads - before.reads).toBe(3);
    expect(after.writes - before.writes).toBe(1);
    after.reads = -1;
    expect(store.database.queryCounts().reads).toBeGreaterThanOrEqual(3);
  });
});
