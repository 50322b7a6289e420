/**
 * SQLite group commit (src/store/sqlite.ts): the writes of one event-loop turn share one COMMIT. What a caller is
 * promised stays per write: it is answered only once its COMMIT has returned (another connection already sees it), and
 * a write that fails fails alone.
 */
import { afterEach, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Account, Store } from '../../src/store/store.js';
import { tempDir } from '../helpers/tmp.js';

const opened: Store[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()));
});

async function open(dataDir: string): Promise<Store> {
  const store = await openSqliteStore(dataDir);
  opened.push(store);
  return store;
}

const account = (): Account => ({
  id: uuidv7(),
  plan: 'free',
  createdAt: 1_700_000_000_000,
  lastReadyCreatedAt: null,
  deletionGraceDays: 0,
});

it('answers a write only once it is committed: another connection sees it at once', async () => {
  const dataDir = tempDir('coffer-group-commit-');
  const store = await open(dataDir);
  await store.migrate();
  const other = await open(dataDir);
  const accounts = [account(), account(), account()];
  // Started in one turn: one group, one COMMIT.
  await Promise.all(accounts.map((a) => store.createAccount(a)));
  for (const a of accounts) expect(await other.getAccount(a.id)).toMatchObject({ id: a.id });
});

it('a write that fails in a group fails alone; the others of its turn are kept', async () => {
  const dataDir = tempDir('coffer-group-commit-');
  const store = await open(dataDir);
  await store.migrate();
  const first = account();
  await store.createAccount(first);
  const kept = [account(), account()];
  const results = await Promise.allSettled([store.createAccount(kept[0]!), store.createAccount(first), store.createAccount(kept[1]!)]);
  expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  await store.close();
  opened.splice(opened.indexOf(store), 1);
  const reopened = await open(dataDir);
  for (const a of kept) expect(await reopened.getAccount(a.id)).toMatchObject({ id: a.id });
});
