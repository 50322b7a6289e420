/**
 * What the metadata cache (src/store/cached-store.ts) promises about changes, on a real SQLite database: every
 * write made through it is seen by the next read of each cached kind; a change heard on the change feed (how
 * PostgreSQL's NOTIFY arrives) drops the account's entries and only that account's; while the feed is down nothing
 * is cached; a failed write drops everything. The writes below go to the same connection underneath the cache,
 * which SQLite's data_version does not see: only the mechanism under test can make a read fresh.
 */
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import { type CachedPorts, type ChangeFeed, cachedPorts } from '../../src/store/cached-store.js';
import { openSqliteStores } from '../../src/store/sqlite.js';
import type { Account, ApiKey, Vault } from '../../src/domain/entities.js';
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

/** A change feed driven by the test: the interface PostgreSQL's LISTEN connection implements (status bus). */
class TestFeed implements ChangeFeed {
  live = true;
  private readonly events = new EventEmitter();
  onChange(listener: (accountId: string) => void) {
    this.events.on('change', listener);
  }
  onLive(listener: (live: boolean) => void) {
    this.events.on('live', listener);
  }
  change(accountId: string) {
    this.events.emit('change', accountId);
  }
  setLive(live: boolean) {
    this.live = live;
    this.events.emit('live', live);
  }
}

describe('metadata cache invalidation', () => {
  let inner: Stores;

  beforeEach(async () => {
    inner = await openSqliteStores(tempDir('coffer-cache-inv-'));
    await inner.database.migrate();
  });
  afterEach(async () => {
    await inner.database.close();
  });

  async function seed(store: Stores) {
    const account: Account = { id: uuidv7(), plan: 'free', createdAt: T0, lastReadyCreatedAt: null, deletionGraceDays: 0 };
    await store.accounts.createAccount(account);
    await store.vaults.createVault(account.id, vault('A'));
    const key: ApiKey = {
      id: uuidv7(),
      accountId: account.id,
      scopes: ['backups:read'],
      createdAt: T0,
      expiresAt: null,
      revokedAt: null,
      appendOnly: false,
    };
    const keyHash = `h${uuidv7()}`;
    await store.keys.createApiKey(key, keyHash);
    return { account, key, keyHash };
  }

  /** Reads every cached kind for the account, twice (the second from memory). */
  async function prime(ports: Omit<CachedPorts, 'cache'>, accountId: string, keyHash: string) {
    for (let i = 0; i < 2; i++) {
      await ports.accounts.getAccount(accountId);
      await ports.vaults.getVault(accountId);
      await ports.backups.listBackups(accountId, ['PENDING_UPLOAD', 'READY']);
      await ports.keys.findApiKeyByHash(keyHash);
    }
  }

  it('caches: a change made underneath it, unannounced, is not seen (the control for every test below)', async () => {
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    const { account, keyHash } = await seed(inner);
    await prime(ports, account.id, keyHash);
    await inner.accounts.setPlan(account.id, 'pro');
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('free');
  });

  it('every write through it is seen by the next read of what it changed', async () => {
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    const { account, key, keyHash } = await seed(inner);
    const fresh = () => prime(ports, account.id, keyHash);

    await fresh();
    expect(await ports.accounts.setPlan(account.id, 'plus')).toBe(true);
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('plus');

    await fresh();
    expect(await ports.accounts.setDeletionGrace(account.id, 7)).toBe(true);
    expect((await ports.accounts.getAccount(account.id))?.deletionGraceDays).toBe(7);

    await fresh();
    const keep = { id: uuidv7(), replacedAt: T0, replacedBy: 'test', reason: 'rotate' as const, expiresAt: T0 + 86_400_000, limit: 10 };
    expect(await ports.vaults.replaceVault(account.id, vault('B'), { keep })).toBe(true);
    expect((await ports.vaults.getVault(account.id))?.wrappedMasterKey).toBe(vault('B').wrappedMasterKey);

    await fresh();
    expect(await ports.vaults.restoreVault(account.id, keep.id, T0 + 1, undefined)).toBeDefined();
    expect((await ports.vaults.getVault(account.id))?.wrappedMasterKey).toBe(vault('A').wrappedMasterKey);
    await fresh();

    expect(await ports.vaults.deleteVault(account.id)).toBe(true);
    expect(await ports.vaults.getVault(account.id)).toBeUndefined();
    await fresh();
    expect(await ports.vaults.createVault(account.id, vault('C'))).toBe(true);
    expect((await ports.vaults.getVault(account.id))?.wrappedMasterKey).toBe(vault('C').wrappedMasterKey);

    await fresh();
    const id = uuidv7();
    expect(
      (await ports.backups.createBackup(account.id, T0, () => ({ allowed: true }), newSlot(id, account.id, T0, T0 + 3_600_000))).allowed,
    ).toBe(true);
    expect((await ports.backups.listBackups(account.id, ['PENDING_UPLOAD', 'READY'])).map((b) => b.id)).toEqual([id]);

    await fresh();
    expect(await ports.backups.updateBackup(id, { statuses: ['PENDING_UPLOAD'] }, { status: 'UPLOADED' })).toBeDefined();
    expect((await ports.backups.listBackups(account.id, ['PENDING_UPLOAD', 'READY'])).map((b) => b.id)).toEqual([]);

    await fresh();
    expect(await ports.backups.markReady(id, { statuses: ['UPLOADED'] }, { status: 'READY', ciphertextSizeBytes: 1 })).toBeDefined();
    expect((await ports.backups.listBackups(account.id, ['PENDING_UPLOAD', 'READY'])).map((b) => b.status)).toEqual(['READY']);
    expect((await ports.accounts.getAccount(account.id))?.lastReadyCreatedAt).toBe(T0);

    await fresh();
    const second: ApiKey = { ...key, id: uuidv7(), scopes: ['backups:write'] };
    await ports.keys.createApiKey(second, `${keyHash}2`);
    expect((await ports.keys.findApiKeyByHash(`${keyHash}2`))?.id).toBe(second.id);

    await fresh();
    expect(await ports.keys.revokeApiKey(key.id, T0 + 5)).toBe(true);
    expect((await ports.keys.findApiKeyByHash(keyHash))?.revokedAt).toBe(T0 + 5);
  });

  it('an account created through it is read at once, though its absence was cached', async () => {
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    const account: Account = { id: uuidv7(), plan: 'plus', createdAt: T0, lastReadyCreatedAt: null, deletionGraceDays: 0 };
    expect(await ports.accounts.getAccount(account.id)).toBeUndefined();
    expect(await ports.accounts.getAccount(account.id)).toBeUndefined();
    await ports.accounts.createAccount(account);
    expect(await ports.accounts.getAccount(account.id)).toEqual(account);
  });

  it("a change to one account while reads are in flight keeps the other accounts' entries", async () => {
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    const a = await seed(inner);
    const b = await seed(inner);
    await prime(ports, b.account.id, b.keyHash);
    const entries = cache.size.entries;
    const inFlight = ports.accounts.getAccount(a.account.id);
    cache.invalidate(a.account.id);
    await inFlight;
    const reads = inner.database.queryCounts().reads;
    await prime(ports, b.account.id, b.keyHash);
    expect(inner.database.queryCounts().reads).toBe(reads);
    expect(cache.size.entries).toBe(entries);
  });

  it('hands out values frozen all the way down', async () => {
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    const { account } = await seed(inner);
    await ports.vaults.getVault(account.id);
    const cached = (await ports.vaults.getVault(account.id))!;
    expect(() => {
      (cached.kdf as { opslimit: number }).opslimit = 1;
    }).toThrow(TypeError);
  });

  it('with an age limit, an entry is read again once it is older (the backstop for a lost notification)', async () => {
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20, ttlMs: 1 });
    const { account } = await seed(inner);
    await ports.accounts.getAccount(account.id);
    await inner.accounts.setPlan(account.id, 'pro');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('pro');
  });

  it("a change heard on the feed drops that account's entries, and only that account's", async () => {
    const feed = new TestFeed();
    const { cache: _, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20, changes: feed });
    const a = await seed(inner);
    const b = await seed(inner);
    await prime(ports, a.account.id, a.keyHash);
    await prime(ports, b.account.id, b.keyHash);
    await inner.accounts.setPlan(a.account.id, 'pro');
    await inner.accounts.setPlan(b.account.id, 'pro');
    await inner.keys.revokeApiKey(a.key.id, T0 + 9);
    await inner.vaults.replaceVault(a.account.id, vault('Z'));
    feed.change(a.account.id);
    expect((await ports.accounts.getAccount(a.account.id))?.plan).toBe('pro');
    expect((await ports.keys.findApiKeyByHash(a.keyHash))?.revokedAt).toBe(T0 + 9);
    expect((await ports.vaults.getVault(a.account.id))?.wrappedMasterKey).toBe(vault('Z').wrappedMasterKey);
    expect((await ports.accounts.getAccount(b.account.id))?.plan).toBe('free');
  });

  it('while the feed is down nothing is cached; going down and coming back each drop everything', async () => {
    const feed = new TestFeed();
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20, changes: feed });
    const { account, keyHash } = await seed(inner);
    await prime(ports, account.id, keyHash);
    feed.setLive(false);
    await inner.accounts.setPlan(account.id, 'plus');
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('plus');
    await inner.accounts.setPlan(account.id, 'pro');
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('pro');
    expect(cache.size.entries).toBe(0);

    feed.setLive(true);
    await prime(ports, account.id, keyHash);
    expect(cache.size.entries).toBeGreaterThan(0);
    await inner.accounts.setPlan(account.id, 'free');
    feed.setLive(false);
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('free');
    await inner.accounts.setPlan(account.id, 'plus');
    feed.setLive(true);
    expect((await ports.accounts.getAccount(account.id))?.plan).toBe('plus');
  });

  it('a store opened while its feed is down caches nothing until the feed is up', async () => {
    const feed = new TestFeed();
    feed.live = false;
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20, changes: feed });
    const { account, keyHash } = await seed(inner);
    await prime(ports, account.id, keyHash);
    expect(cache.size.entries).toBe(0);
  });

  it('a write that fails drops everything it might have changed', async () => {
    const { cache, ...ports } = cachedPorts(inner, { maxBytes: 1 << 20 });
    const a = await seed(inner);
    const b = await seed(inner);
    await prime(ports, a.account.id, a.keyHash);
    await prime(ports, b.account.id, b.keyHash);
    await inner.accounts.setPlan(b.account.id, 'pro');
    await inner.database.close();
    await expect(ports.backups.markReady(uuidv7(), { statuses: ['UPLOADED'] }, { status: 'READY' })).rejects.toThrow();
    inner = await openSqliteStores(tempDir('coffer-cache-inv-'));
    expect(cache.size.entries).toBe(0);
  });
});
