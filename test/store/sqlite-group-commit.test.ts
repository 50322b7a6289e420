/**
 * SQLite group commit (src/store/sqlite.ts): the writes of one event-loop turn share one COMMIT. What a caller is
 * promised stays per write: it is answered only once its COMMIT has returned (another connection already sees it), and
 * a write that fails fails alone.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import { openSqliteStores } from '../../src/store/sqlite.js';
import type { Account } from '../../src/domain/entities.js';
import type { Stores } from '../../src/store/ports/stores.js';
import { tempDir } from '../helpers/tmp.js';

const opened: Stores[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.database.close()));
});

async function open(dataDir: string): Promise<Stores> {
  const store = await openSqliteStores(dataDir);
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

/**
 * How many transactions are committed in the SQLite WAL file of `dataDir`: its frames of the current generation (the
 * salts of the WAL header) whose "database size after commit" field is set, one per COMMIT (sqlite.org/fileformat.html §4).
 */
function commitsInWal(dataDir: string): number {
  const wal = fs.readFileSync(path.join(dataDir, 'coffer.sqlite-wal'));
  if (wal.length < 32) return 0;
  const pageSize = wal.readUInt32BE(8);
  const salts = wal.subarray(16, 24);
  let commits = 0;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (!wal.subarray(at + 8, at + 16).equals(salts)) break;
    if (wal.readUInt32BE(at + 4) !== 0) commits++;
  }
  return commits;
}

it('writes started in one turn of the event loop share one COMMIT; writes in turns of their own commit apart', async () => {
  const dataDir = tempDir('coffer-group-commit-');
  const store = await open(dataDir);
  await store.database.migrate();
  expect(fs.existsSync(path.join(dataDir, 'coffer.sqlite-wal'))).toBe(true);

  const before = commitsInWal(dataDir);
  await Promise.all([account(), account(), account(), account()].map((a) => store.accounts.createAccount(a)));
  expect(commitsInWal(dataDir) - before).toBe(1);

  // The count sees every commit: one write per turn, one COMMIT each.
  const between = commitsInWal(dataDir);
  for (let i = 0; i < 3; i++) await store.accounts.createAccount(account());
  expect(commitsInWal(dataDir) - between).toBe(3);
});

it('answers a write only once it is committed: another connection sees it at once', async () => {
  const dataDir = tempDir('coffer-group-commit-');
  const store = await open(dataDir);
  await store.database.migrate();
  const other = await open(dataDir);
  const accounts = [account(), account(), account()];
  // Started in one turn: one group, one COMMIT.
  await Promise.all(accounts.map((a) => store.accounts.createAccount(a)));
  for (const a of accounts) expect(await other.accounts.getAccount(a.id)).toMatchObject({ id: a.id });
});

it('a write that fails in a group fails alone; the others of its turn are kept', async () => {
  const dataDir = tempDir('coffer-group-commit-');
  const store = await open(dataDir);
  await store.database.migrate();
  const first = account();
  await store.accounts.createAccount(first);
  const kept = [account(), account()];
  const results = await Promise.allSettled([
    store.accounts.createAccount(kept[0]!),
    store.accounts.createAccount(first),
    store.accounts.createAccount(kept[1]!),
  ]);
  expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  await store.database.close();
  opened.splice(opened.indexOf(store), 1);
  const reopened = await open(dataDir);
  for (const a of kept) expect(await reopened.accounts.getAccount(a.id)).toMatchObject({ id: a.id });
});
