/**
 * The metadata cache's own rules, on a real SQLite database: its memory stays within the configured bound (least
 * recently used entries go first), a read that was in flight while its account changed is never kept, concurrent
 * misses share one database read unless a change came between them, and another connection's commit (a
 * `coffer admin` process) empties it (PRAGMA data_version).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import { CachedStore } from '../../src/store/cached-store.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Account, Store, Vault } from '../../src/store/store.js';
import { newSlot } from '../../src/services/backups.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.parse('2026-11-21T10:00:00.000Z');

const vault = (fill: string): Vault => ({
  cryptoVersion: 'v1',
  kdf: { salt: fill.repeat(24), opslimit: 3, memlimit: 268_435_456 },
  wrappedMasterKey: fill.repeat(64),
  wrappedMasterKeyNonce: fill.repeat(32),
  updatedAt: T0,
});

describe('CachedStore over SQLite', () => {
  let dataDir: string;
  let inner: Store;
  const opened: Store[] = [];

  beforeEach(async () => {
    dataDir = tempDir('coffer-cache-');
    inner = await openSqliteStore(dataDir);
    await inner.migrate();
    opened.push(inner);
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((store) => store.close()));
  });

  async function newAccount(store: Store, plan: Account['plan'] = 'free'): Promise<Account> {
    const account: Account = { id: uuidv7(), plan, createdAt: T0, lastReadyCreatedAt: null, deletionGraceDays: 0 };
    await store.createAccount(account);
    await store.createVault(account.id, vault('A'));
    return account;
  }

  const reads = (store: Store) => store.queryCounts().reads;

  it('stays within its byte bound: the least recently used entries go, and every answer is still right', async () => {
    const maxBytes = 64 * 1024;
    const cache = new CachedStore(inner, { maxBytes });
    const accounts: Account[] = [];
    for (let i = 0; i < 300; i++) accounts.push(await newAccount(inner, i % 2 === 0 ? 'free' : 'pro'));
    for (const account of accounts) {
      expect(await cache.getAccount(account.id)).toEqual(account);
      expect((await cache.getVault(account.id))?.wrappedMasterKey).toBe(vault('A').wrappedMasterKey);
      expect(cache.size.bytes).toBeLessThanOrEqual(maxBytes);
    }
    // 600 entries were read; far fewer fit.
    expect(cache.size.entries).toBeGreaterThan(20);
    expect(cache.size.entries).toBeLessThan(300);
    // The newest are served from memory, the oldest were evicted and are read again.
    const before = reads(inner);
    expect(await cache.getAccount(accounts.at(-1)!.id)).toEqual(accounts.at(-1));
    expect(reads(inner)).toBe(before);
    expect(await cache.getAccount(accounts[0]!.id)).toEqual(accounts[0]);
    expect(reads(inner)).toBe(before + 1);

    // A list larger than an eighth of the cache is answered but not kept.
    const big = accounts[1]!;
    for (let i = 0; i < 40; i++) {
      const slot = { ...newSlot(uuidv7(), big.id, T0 + i, T0 + 3_600_000), encryptedMetadata: 'M'.repeat(1000) };
      expect((await cache.createBackup(big.id, T0 + i, () => ({ allowed: true }), slot)).allowed).toBe(true);
    }
    expect(await cache.listBackups(big.id, ['PENDING_UPLOAD'])).toHaveLength(40);
    const afterList = reads(inner);
    expect(await cache.listBackups(big.id, ['PENDING_UPLOAD'])).toHaveLength(40);
    expect(reads(inner)).toBe(afterList + 1);
    expect(cache.size.bytes).toBeLessThanOrEqual(maxBytes);
  });

  it('hands out frozen values: a caller cannot change what the next caller reads', async () => {
    const cache = new CachedStore(inner, { maxBytes: 1024 * 1024 });
    const account = await newAccount(inner);
    await cache.getAccount(account.id);
    const cached = (await cache.getAccount(account.id))!;
    expect(() => {
      (cached as { plan: string }).plan = 'pro';
    }).toThrow(TypeError);
    expect((await cache.getAccount(account.id))?.plan).toBe('free');
  });

  it('never keeps a read that was in flight while its account changed, and a read after a change never joins one before it', async () => {
    const cache = new CachedStore(inner, { maxBytes: 1024 * 1024 });
    const account = await newAccount(inner);

    // A change announced (as this store's writes and notifications do) while a read is in flight: not kept.
    const inFlight = cache.getAccount(account.id);
    cache.invalidate(account.id);
    await inFlight;
    let before = reads(inner);
    await cache.getAccount(account.id);
    expect(reads(inner)).toBe(before + 1);

    // A read that starts after a change does not join one still in flight from before it: two database reads.
    await inner.setPlan(account.id, 'pro');
    cache.invalidate(account.id);
    before = reads(inner);
    const first = cache.getAccount(account.id);
    cache.invalidate(account.id);
    const second = cache.getAccount(account.id);
    expect((await first)?.plan).toBe('pro');
    expect((await second)?.plan).toBe('pro');
    expect(reads(inner)).toBe(before + 2);
    // The later one was kept.
    expect((await cache.getAccount(account.id))?.plan).toBe('pro');
    expect(reads(inner)).toBe(before + 2);

    // Without a change in between, concurrent misses share one database read.
    cache.invalidate(account.id);
    const shared = reads(inner);
    const answers = await Promise.all([cache.getAccount(account.id), cache.getAccount(account.id), cache.getAccount(account.id)]);
    expect(answers.map((a) => a?.plan)).toEqual(['pro', 'pro', 'pro']);
    expect(reads(inner)).toBe(shared + 1);
  });

  it("another connection's commit (a coffer admin process) empties the cache: PRAGMA data_version", async () => {
    const cache = new CachedStore(inner, { maxBytes: 1024 * 1024 });
    const account = await newAccount(inner);
    expect((await cache.getAccount(account.id))?.plan).toBe('free');
    expect((await cache.getAccount(account.id))?.plan).toBe('free');
    const other = await openSqliteStore(dataDir);
    opened.push(other);
    expect(await other.setPlan(account.id, 'plus')).toBe(true);
    // One look at data_version holds for 1 ms (src/store/cached-store.ts): a read that starts later sees the commit.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const clears = cache.stats.clears;
    expect((await cache.getAccount(account.id))?.plan).toBe('plus');
    expect(cache.stats.clears).toBe(clears + 1);
  });
});
