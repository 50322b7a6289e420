/** The statement counters a benchmark (P4: database reads per second) and /metrics read from the Store. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { tempDir } from '../helpers/tmp.js';

describe('Store.queryCounts', () => {
  let store: Awaited<ReturnType<typeof openSqliteStore>>;
  beforeAll(async () => {
    store = await openSqliteStore(tempDir('coffer-counts-'));
  });
  afterAll(() => store.close());

  it('counts reads and writes separately, and returns a snapshot', async () => {
    await store.migrate();
    const before = store.queryCounts();
    await store.createAccount({ id: 'a1', plan: 'pro', createdAt: 1, lastReadyCreatedAt: null });
    await store.getAccount('a1');
    await store.getAccount('a1');
    await store.getBackup('00000000-0000-7000-8000-000000000000');
    const after = store.queryCounts();
    expect(after.reads - before.reads).toBe(3);
    expect(after.writes - before.writes).toBe(1);
    after.reads = -1;
    expect(store.queryCounts().reads).toBeGreaterThanOrEqual(3);
  });
});
