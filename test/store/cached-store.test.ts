/**
 * The metadata cache's own rules, on a real SQLite database: its memory stays within the configured bound (least
 * recently used entries go first), a read that was in flight while its account changed is never kept, concurrent
 * misses share one database read unless a change came between them, and another connection's commit (a
 * `coffer admin` process) empties it (PRAGMA data_version).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import { type ChangeFeed, type MetadataCache, cachedPorts } from '../../src/store/cached-store.js';
import { NOT_CACHED } from '../../src/store/ports/keys.js';
import { openSqliteStores } from '../../src/store/sqlite.js';
import type { Account, Vault } from '../../src/domain/entities.js';
import type { Stores } from '../../src/store/ports/stores.js';
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

describe('the metadata cache over SQLite', () => {
  let dataDir: string;
  let inner: Stores;
  const opened: Stores[] = [];

  beforeEach(async () => {
    dataDir = tempDir('coffer-cache-');
    inner = await openSqliteStores(dataDir);
    await inner.database.migrate();
    opened.push(inner);
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((store) => store.database.close()));
  });

  async function newAccount(store: Stores, plan: Account['plan'] = 'free'): Promise<Account> {
    const account: Account = { id: uuidv7(), plan, createdAt: T0, lastReadyCreatedAt: null, deletionGraceDays: 0 };
    await store.accounts.createAccount(account);
    await store.vaults.createVault(account.id, vault('A'));
    return account;
  }

  const reads = (store: Stores) => store.database.queryCounts().reads;

  it('stays within its byte bound: the least recently used entries go, and every answer is still right', async () => {
    const maxBytes = 64 * 1024;
    const { cache, ...ports } = cachedPorts(inner, { maxBytes });
    const accounts: Account[] = [];
    for (let i = 0; i < 300; i++) accounts.push(await newAccount(inner, i % 2 === 0 ? 'free' : 'pro'));
    for (const account of accounts) {
      expect(await ports.accounts.getAccount(account.id)).toEqual(account);
      expect((await ports.vaults.getVault(account.id))?.wrappedMasterKey).toBe(vault('A').wrappedMasterKey);
      expect(cache.size.bytes).toBeLessThanOrEqual(maxBytes);
    }
    // 600 entries were read; far fewer fit.
    expect(cache.size.entries).toBeGreaterThan(20);
    expect(cache.size.entries).toBeLessThan(300);
    // The newest are served from memory, the oldest were evicted and are read again.
    const before = reads(inner);
    expect(await ports.accounts.getAccount(accounts.at(-1)!.id)).toEqual(accounts.at(-1));
    expect(reads(inner)).toBe(before);
    expect(await ports.accounts.getAccount(accounts[0]!.id)).toEqual(accounts[0]);
    expect(reads(inner)).toBe(before + 1);

    // A list larger than an eighth of the cache is answered but not kept.
    const big = accounts[1]!;
    for (let i = 0; i < 40; i++) {
      const slot = { ...newSlot(uuidv7(), big.id, T0 + i, T0 + 3_600_000), encryptedMetadata: 'M'.repeat(1000) };
      expect((await ports.backups.createBackup(big.id, T0 + i, () => ({ allowed: true }), slot)).allowed).toBe(true);
    }
    expect(await ports.backups.listBackups(big.id, ['PENDING_UPLOAD'])).toHaveLength(40);
    const afterList = reads(inner);
    expect(await ports.backups.listBackups(big.id, ['PENDING_UPLOAD'])).toHaveLength(40);
    expect(reads(inner)).toBe(afterList + 1);
    expect(cache.size.bytes).toBeLessThanOrEqual(maxBytes);
  });

  it('hands out frozen values: a caller cannot change what the next caller reads', async () => {
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1024 * 1024 });
    const account = await newAccount(inner);
    await ports.accounts.getAccount(account.id);
    const cached = (await ports.accounts.getAccount(account.id))!;
    expect(() => {
      (cached as { plan: string }).plan = 'pro';
    }).toThrow(TypeError);
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('free');
  });

  it('never keeps a read that was in flight while its account changed, and a read after a change never joins one before it', async () => {
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1024 * 1024 });
    const account = await newAccount(inner);

    // A change announced (as this store's writes and notifications do) while a read is in flight: not kept.
    const inFlight = ports.accounts.getAccount(account.id);
    cache.invalidate(account.id);
    await inFlight;
    let before = reads(inner);
    await ports.accounts.getAccount(account.id);
    expect(reads(inner)).toBe(before + 1);

    // A read that starts after a change does not join one still in flight from before it: two database reads.
    await inner.accounts.setPlan(account.id, 'pro');
    cache.invalidate(account.id);
    before = reads(inner);
    const first = ports.accounts.getAccount(account.id);
    cache.invalidate(account.id);
    const second = ports.accounts.getAccount(account.id);
    expect((await first)?.plan).toBe('pro');
    expect((await second)?.plan).toBe('pro');
    expect(reads(inner)).toBe(before + 2);
    // The later one was kept.
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('pro');
    expect(reads(inner)).toBe(before + 2);

    // Without a change in between, concurrent misses share one database read.
    cache.invalidate(account.id);
    const shared = reads(inner);
    const answers = await Promise.all([
      ports.accounts.getAccount(account.id),
      ports.accounts.getAccount(account.id),
      ports.accounts.getAccount(account.id),
    ]);
    expect(answers.map((a) => a?.plan)).toEqual(['pro', 'pro', 'pro']);
    expect(reads(inner)).toBe(shared + 1);
  });

  it("another connection's commit (a coffer admin process) empties the cache: PRAGMA data_version", async () => {
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1024 * 1024 });
    const account = await newAccount(inner);
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('free');
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('free');
    const other = await openSqliteStores(dataDir);
    opened.push(other);
    expect(await other.accounts.setPlan(account.id, 'plus')).toBe(true);
    // One look at data_version holds for 1 ms (src/store/cached-store.ts): a read that starts later sees the commit.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const clears = cache.stats.clears;
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('plus');
    expect(cache.stats.clears).toBe(clears + 1);
  });
});

/**
 * The same rules over scripted ports: each read it answers can be held in flight and released by the test, it
 * counts its reads and its `changeVersion` looks, and the clock of the version checks is the test's. Every step of
 * the cache's bookkeeping is then visible: what is kept, what is shared, what is dropped, what it costs.
 */
describe('the metadata cache over scripted ports', () => {
  interface Held {
    key: string;
    release: () => void;
  }
  function scripted(options: { version?: boolean } = {}) {
    const rows = new Map<string, unknown>();
    const reads: string[] = [];
    const held: Held[] = [];
    const state = { hold: false, version: 0, versionLooks: 0, clock: 1000 };
    const read = async (key: string) => {
      reads.push(key);
      const value = rows.get(key); // the row as it was when the read began
      if (state.hold) await new Promise<void>((release) => held.push({ key, release }));
      return value;
    };
    const inner = {
      database: {
        kind: 'sqlite',
        ...(options.version
          ? {
              changeVersion: () => {
                state.versionLooks += 1;
                return state.version;
              },
            }
          : {}),
      },
      accounts: {
        getAccount: (id: string) => read(`a:${id}`),
        setQuota: async () => true,
      },
      vaults: { getVault: (id: string) => read(`v:${id}`) },
      keys: {
        findApiKeyByHash: (hash: string) => read(`k:${hash}`),
        revokeApiKey: async (keyId: string) => {
          if (keyId === 'broken') throw new Error('database gone');
          return rows.has(`key:${keyId}`) || keyId === 'vanished';
        },
        getApiKey: (keyId: string) => read(`key:${keyId}`),
      },
      backups: {
        listBackups: (id: string, statuses: readonly string[]) => read(`l:${id}:${statuses.join('+')}`),
        updateBackup: (id: string) => read(`b:${id}`),
        markReady: (id: string) => read(`b:${id}`),
      },
    } as unknown as Stores;
    return { inner, rows, reads, held, state };
  }
  /** Releases the held read of `key` (the oldest one) and lets its continuations run. */
  async function release(held: Held[], key: string) {
    const at = held.findIndex((h) => h.key === key);
    expect(at).toBeGreaterThanOrEqual(0);
    held.splice(at, 1)[0]!.release();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const account = (id: string, plan = 'free') => ({ id, plan });
  const bookkeeping = (cache: MetadataCache) => (cache as unknown as { byAccount: Map<string, Set<string>> }).byAccount;

  let now = 1000;
  beforeEach(() => {
    now = 1000;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('counts its hits and misses', async () => {
    const { inner, rows } = scripted();
    rows.set('a:A', account('A'));
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    expect(cache.stats).toEqual({ hits: 0, misses: 0, clears: 0 });
    await ports.accounts.getAccount('A');
    await ports.accounts.getAccount('A');
    await ports.accounts.getAccount('A');
    expect(cache.stats).toEqual({ hits: 2, misses: 1, clears: 0 });
  });

  it('keeps each kind of read under its own key: two keys, two vaults, two lists, two sets of statuses', async () => {
    const { inner, rows, reads } = scripted();
    rows.set('k:h1', { id: 'key1', accountId: 'A' });
    rows.set('k:h2', { id: 'key2', accountId: 'B' });
    rows.set('v:A', { wrappedMasterKey: 'a' });
    rows.set('v:B', { wrappedMasterKey: 'b' });
    rows.set('l:A:READY', [{ id: 'a1' }]);
    rows.set('l:B:READY', [{ id: 'b1' }]);
    rows.set('l:A:READY+FAILED', [{ id: 'a1' }, { id: 'a2' }]);
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    for (let i = 0; i < 2; i++) {
      expect(await ports.keys.findApiKeyByHash('h1')).toEqual({ id: 'key1', accountId: 'A' });
      expect(await ports.keys.findApiKeyByHash('h2')).toEqual({ id: 'key2', accountId: 'B' });
      expect(await ports.vaults.getVault('A')).toEqual({ wrappedMasterKey: 'a' });
      expect(await ports.vaults.getVault('B')).toEqual({ wrappedMasterKey: 'b' });
      expect(await ports.backups.listBackups('A', ['READY'])).toEqual([{ id: 'a1' }]);
      expect(await ports.backups.listBackups('B', ['READY'])).toEqual([{ id: 'b1' }]);
      expect(await ports.backups.listBackups('A', ['READY', 'FAILED'])).toHaveLength(2);
      // An unknown key: answered (undefined), never kept under an account.
      expect(await ports.keys.findApiKeyByHash('nope')).toBeUndefined();
    }
    expect(reads.filter((key) => key !== 'k:nope')).toHaveLength(7);
    expect(reads.filter((key) => key === 'k:nope')).toHaveLength(2);
  });

  it('over a store without changeVersion (PostgreSQL), reads and keeps without asking for one', async () => {
    const { inner, rows, reads } = scripted();
    rows.set('a:A', account('A'));
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    expect(await ports.accounts.getAccount('A')).toEqual(account('A'));
    expect(await ports.accounts.getAccount('A')).toEqual(account('A'));
    expect(reads).toEqual(['a:A']);
  });

  it('looks at the data version at most once per millisecond for reads, and always before keeping a loaded value', async () => {
    const { inner, rows, state } = scripted({ version: true });
    rows.set('a:A', account('A'));
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    expect(state.versionLooks).toBe(1); // the version it starts from
    await ports.accounts.getAccount('A'); // a look before the read, and one before keeping what it read
    expect(state.versionLooks).toBe(3);
    await ports.accounts.getAccount('A');
    now += 0.5;
    await ports.accounts.getAccount('A');
    expect(state.versionLooks).toBe(3);
    now = 1001; // exactly one millisecond after the last look
    await ports.accounts.getAccount('A');
    expect(state.versionLooks).toBe(4);
    now = 5000;
    await ports.accounts.getAccount('A');
    await ports.accounts.getAccount('A');
    expect(state.versionLooks).toBe(5);
    expect(cache.stats).toMatchObject({ hits: 5, misses: 1, clears: 0 });
  });

  it('a commit elsewhere before the first read: that read sees it, drops nothing it needs, and is kept', async () => {
    const { inner, rows, state, reads } = scripted({ version: true });
    rows.set('a:A', account('A'));
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    state.version += 1;
    await ports.accounts.getAccount('A');
    await ports.accounts.getAccount('A');
    expect(reads).toEqual(['a:A']);
    expect(cache.stats.clears).toBe(1);
  });

  it('a commit elsewhere while a read is in flight, within the same millisecond: the read is not kept', async () => {
    const { inner, rows, state, held, reads } = scripted({ version: true });
    rows.set('a:A', account('A'));
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    await ports.accounts.getAccount('B'); // a look at the version just now
    state.hold = true;
    const first = ports.accounts.getAccount('A');
    rows.set('a:A', account('A', 'pro'));
    state.version += 1;
    await release(held, 'a:A');
    expect((await first)?.plan).toBe('free');
    state.hold = false;
    expect((await ports.accounts.getAccount('A'))?.plan).toBe('pro');
    expect(reads).toEqual(['a:B', 'a:A', 'a:A']);
  });

  it('a read in flight across a whole-cache drop is not kept, and costs no look at the version', async () => {
    const { inner, rows, state, held, reads } = scripted({ version: true });
    rows.set('a:A', account('A'));
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    state.hold = true;
    const first = ports.accounts.getAccount('A');
    const looks = state.versionLooks;
    cache.clear();
    await release(held, 'a:A');
    await first;
    expect(state.versionLooks).toBe(looks);
    state.hold = false;
    await ports.accounts.getAccount('A');
    expect(reads).toEqual(['a:A', 'a:A']);
  });

  it('while the change feed is down, reads go straight through: not counted, not shared', async () => {
    const { inner, rows, state, held, reads } = scripted();
    rows.set('a:A', account('A'));
    const feed: ChangeFeed = { live: false, onChange: () => {}, onLive: () => {} };
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20, changes: feed });
    state.hold = true;
    const both = Promise.all([ports.accounts.getAccount('A'), ports.accounts.getAccount('A')]);
    expect(reads).toEqual(['a:A', 'a:A']);
    await release(held, 'a:A');
    await release(held, 'a:A');
    await both;
    expect(cache.stats).toEqual({ hits: 0, misses: 0, clears: 0 });
  });

  it('an older read that ends does not stop a later miss from joining the newer read of the same key', async () => {
    const { inner, rows, state, held, reads } = scripted();
    rows.set('a:A', account('A'));
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    state.hold = true;
    const first = ports.accounts.getAccount('A');
    cache.invalidate('A');
    const second = ports.accounts.getAccount('A');
    await release(held, 'a:A');
    await first; // not kept: A changed while it was in flight
    const third = ports.accounts.getAccount('A'); // joins the second
    expect(reads).toEqual(['a:A', 'a:A']);
    await release(held, 'a:A');
    expect(await second).toEqual(await third);
  });

  it('an invalidation is remembered until the last read in flight ends, not the first', async () => {
    const { inner, rows, state, held, reads } = scripted();
    rows.set('a:A', account('A'));
    rows.set('a:B', account('B'));
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    state.hold = true;
    const a = ports.accounts.getAccount('A');
    const b = ports.accounts.getAccount('B');
    cache.invalidate('A');
    await release(held, 'a:B');
    await b;
    await release(held, 'a:A');
    await a;
    state.hold = false;
    await ports.accounts.getAccount('A');
    await ports.accounts.getAccount('B');
    expect(reads).toEqual(['a:A', 'a:B', 'a:A']);
  });

  it('remembers at most 10,000 invalidated accounts while reads are in flight, then drops everything', async () => {
    const { inner, rows, state, held, reads } = scripted();
    rows.set('a:A', account('A'));
    rows.set('a:B', account('B'));
    rows.set('a:C', account('C'));
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    await ports.accounts.getAccount('B');
    // With nothing in flight, nothing is remembered, however many.
    for (let i = 0; i < 10_001; i++) cache.invalidate(`x${i}`);
    expect(cache.stats.clears).toBe(0);
    // Remembered while a read is in flight, and forgotten when it ends.
    state.hold = true;
    const a = ports.accounts.getAccount('A');
    for (let i = 0; i < 5_000; i++) cache.invalidate(`y${i}`);
    await release(held, 'a:A');
    await a;
    const c = ports.accounts.getAccount('C');
    for (let i = 0; i < 9_999; i++) cache.invalidate(`z${i}`);
    expect(cache.stats.clears).toBe(0);
    cache.invalidate('z-last'); // the 10,000th remembered
    expect(cache.stats.clears).toBe(0);
    cache.invalidate('z-beyond');
    expect(cache.stats.clears).toBe(1);
    await release(held, 'a:C');
    await c;
    state.hold = false;
    await ports.accounts.getAccount('C'); // the read in flight across the drop was not kept
    expect(reads.filter((key) => key === 'a:C')).toHaveLength(2);
  });

  it("an entry evicted for space leaves its account's other entries invalidatable, and no bookkeeping behind", async () => {
    const { inner, rows } = scripted();
    const pad = 'p'.repeat(600);
    const ids = ['X0', 'O1', 'O2', 'O3', 'O4', 'O5', 'O6', 'O7', 'O8', 'O9'];
    for (const id of ids) rows.set(`a:${id}`, { id, pad });
    rows.set('v:X0', { id: 'X0', pad });
    const size = 200 + JSON.stringify({ id: 'X0', pad }).length;
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 10 * size });
    await ports.accounts.getAccount('X0');
    await ports.vaults.getVault('X0');
    for (const id of ids.slice(1, 9)) await ports.accounts.getAccount(id);
    expect(cache.size).toEqual({ entries: 10, bytes: 10 * size });
    await ports.accounts.getAccount('O9'); // evicts the least recently used: X0's account
    expect(cache.size.entries).toBe(10);
    rows.set('v:X0', { id: 'X0', pad: 'changed' });
    cache.invalidate('X0');
    expect(await ports.vaults.getVault('X0')).toEqual({ id: 'X0', pad: 'changed' });
    // A list too large to keep is answered and leaves no trace.
    rows.set('l:O1:READY', [{ pad }, { pad }]);
    expect(await ports.backups.listBackups('O1', ['READY'])).toHaveLength(2);
    cache.invalidate('O2');
    const sets = [...bookkeeping(cache).values()];
    expect(sets.every((keys) => keys.size > 0)).toBe(true);
    expect(sets.reduce((n, keys) => n + keys.size, 0)).toBe(cache.size.entries);
    expect(bookkeeping(cache).has('X0')).toBe(true); // its vault, read again
    expect(bookkeeping(cache).has('O2')).toBe(false);
  });

  it('a change whose result names no account changes nothing; one that names it drops that account only', async () => {
    const { inner, rows, reads } = scripted();
    rows.set('a:A', account('A'));
    rows.set('a:B', account('B'));
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    await ports.accounts.getAccount('A');
    await ports.accounts.getAccount('B');
    expect(await ports.backups.updateBackup('none', { statuses: ['PENDING_UPLOAD'] }, { status: 'UPLOADED' })).toBeUndefined();
    rows.set('b:mine', { id: 'mine', accountId: 'A' });
    expect(await ports.backups.markReady('mine', { statuses: ['UPLOADED'] }, { status: 'READY' })).toEqual({ id: 'mine', accountId: 'A' });
    await ports.accounts.getAccount('A');
    await ports.accounts.getAccount('B');
    expect(reads.filter((key) => key.startsWith('a:'))).toEqual(['a:A', 'a:B', 'a:A']);
    expect(cache.stats.clears).toBe(0);
  });

  it("a quota change drops the account's entries", async () => {
    const { inner, rows, reads } = scripted();
    rows.set('a:A', account('A'));
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    await ports.accounts.getAccount('A');
    expect(await ports.accounts.setQuota('A', 5)).toBe(true);
    await ports.accounts.getAccount('A');
    expect(reads).toEqual(['a:A', 'a:A']);
  });

  it("revoking a key: its owner's entries go; an unknown key changes nothing; a key gone meanwhile or a failure drops everything", async () => {
    const { inner, rows, reads } = scripted();
    rows.set('a:A', account('A'));
    rows.set('a:B', account('B'));
    rows.set('key:k1', { id: 'k1', accountId: 'A' });
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    const readBoth = async () => {
      await ports.accounts.getAccount('A');
      await ports.accounts.getAccount('B');
    };
    await readBoth();
    expect(await ports.keys.revokeApiKey('k1', 5)).toBe(true);
    await readBoth();
    expect(reads.filter((key) => key.startsWith('a:'))).toEqual(['a:A', 'a:B', 'a:A']);
    expect(cache.stats.clears).toBe(0);

    expect(await ports.keys.revokeApiKey('unknown', 5)).toBe(false);
    await readBoth();
    expect(cache.stats.clears).toBe(0);
    expect(cache.size.entries).toBe(2);

    expect(await ports.keys.revokeApiKey('vanished', 5)).toBe(true); // revoked, but its row is gone when looked up
    expect(cache.stats.clears).toBe(1);
    expect(cache.size.entries).toBe(0);
    await readBoth();

    await expect(ports.keys.revokeApiKey('broken', 5)).rejects.toThrow('database gone');
    expect(cache.stats.clears).toBe(2);
    expect(cache.size.entries).toBe(0);
  });

  it('peeks without waiting: not cached until a read kept the answer, then that answer (a hit); a commit elsewhere empties it', async () => {
    const { inner, rows, reads, state } = scripted({ version: true });
    rows.set('k:h1', { id: 'key1', accountId: 'A' });
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    expect(ports.keys.peekApiKeyByHash!('h1')).toBe(NOT_CACHED);
    expect(cache.stats.hits).toBe(0);
    expect(await ports.keys.findApiKeyByHash('h1')).toEqual({ id: 'key1', accountId: 'A' });
    expect(ports.keys.peekApiKeyByHash!('h1')).toEqual({ id: 'key1', accountId: 'A' });
    expect(cache.stats).toMatchObject({ hits: 1, misses: 1 });
    expect(ports.keys.peekApiKeyByHash!('h2')).toBe(NOT_CACHED);
    // An unknown key is answered by a read and never kept: a peek cannot tell.
    expect(await ports.keys.findApiKeyByHash('nope')).toBeUndefined();
    expect(ports.keys.peekApiKeyByHash!('nope')).toBe(NOT_CACHED);
    // A missing row that is kept (a vault) peeks as undefined, and counts as a hit.
    expect(await ports.vaults.getVault('A')).toBeUndefined();
    expect(cache.peek('v:A')).toBeUndefined();
    expect(cache.stats).toMatchObject({ hits: 2, misses: 3, clears: 0 });
    // Another connection commits: a peek a millisecond later finds nothing.
    state.version += 1;
    now += 1;
    expect(ports.keys.peekApiKeyByHash!('h1')).toBe(NOT_CACHED);
    expect(cache.stats).toMatchObject({ hits: 2, clears: 1 });
    expect(reads).toEqual(['k:h1', 'k:nope', 'v:A']);
  });

  it('hands out values frozen all the way down, strings and all', async () => {
    const { inner, rows } = scripted();
    rows.set('v:A', { kdf: { salt: 'abc', limits: [1, 2] }, note: 'text', none: null });
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    await ports.vaults.getVault('A');
    const vault = (await ports.vaults.getVault('A')) as unknown as { kdf: { salt: string; limits: number[] }; note: string };
    expect(vault).toEqual({ kdf: { salt: 'abc', limits: [1, 2] }, note: 'text', none: null });
    expect(Object.isFrozen(vault.kdf.limits)).toBe(true);
    expect(cache.stats.hits).toBe(1);
  });
});
