/**
 * The reads every API request makes (API key → key record, account, vault, an account's list of backups) served
 * from this process's memory: decorators of the four ports those reads belong to (keys, accounts, vaults, backups),
 * over any implementation of them, so the services see the same ports and the shared store suite runs against them
 * too; every other port is wired straight through (src/server/compose.ts). Reads far outnumber changes (bench P3,
 * BENCHMARKS.md#p3).
 *
 * Correctness rests on invalidation, never on age alone:
 * - a change made through these ports invalidates the changed account's entries before the write returns. Every
 *   write that changes a cached row is a method of a cached port (the key, account, vault and backup writes, and
 *   markReady's account cadence); the other ports' writes (usage reservations and their row locks, sessions,
 *   sign-ins, audit, settings, multipart bookkeeping, vault history pruning) change no cached row;
 * - a change made elsewhere arrives through `changes`: PostgreSQL's NOTIFY from a trigger on the cached tables
 *   (migration 0006), so other nodes and `coffer admin` processes are heard; while that feed is down nothing is
 *   cached (and everything is dropped when it goes down and when it comes back);
 * - SQLite has no notifications, but `PRAGMA data_version` changes whenever another connection (a `coffer admin`
 *   process) commits: cached reads compare it first and drop everything when it moved. The pragma is a statement
 *   (6–8 µs here, three per request), so it is asked at most once per VERSION_CHECK_MS: another process's commit is
 *   seen by every read that starts 1 ms after it (this process's own writes, at once).
 * - `ttlMs` bounds the age of an entry as a backstop (a notification lost without the connection failing).
 * A read that was in flight while its account was invalidated is not kept (the epoch stamps below), so an old row
 * read just before a change can never be cached after it.
 *
 * What stays with the caller: times. A cached key keeps its expiresAt and the services check it against the clock
 * on every request; a cached list keeps its records and BackupService.list checks whether any is due on every call.
 * Cached values are frozen: a caller that tried to change one would throw instead of corrupting the cache.
 */
import { LRUCache } from 'lru-cache';
import type { BackupStatus } from '../domain/backups.js';
import type { Account, ApiKey, Backup, Vault } from '../domain/entities.js';
import type { AccountStore } from './ports/accounts.js';
import type { BackupStore } from './ports/backups.js';
import { type KeyStore, NOT_CACHED } from './ports/keys.js';
import type { Stores } from './ports/stores.js';
import type { VaultStore } from './ports/vaults.js';

/** Changes committed through other handles of the same database (other nodes, operator commands), by account. */
export interface ChangeFeed {
  /** Whether changes are being heard now. */
  readonly live: boolean;
  /** `listener(accountId)` for each change heard (possibly also for this process's own changes). */
  onChange(listener: (accountId: string) => void): void;
  /** `listener(live)` when the feed breaks (false: changes may be missed from now on) and when it is back (true). */
  onLive(listener: (live: boolean) => void): void;
}

export interface CacheOptions {
  /** The bound of the cache: the estimated size of what it holds (JSON length of the values plus a fixed overhead). */
  maxBytes: number;
  /** Entries are read again after this long (a backstop for a missed notification); undefined: no age limit. */
  ttlMs?: number;
  /** Changes made elsewhere (PostgreSQL: LISTEN/NOTIFY); SQLite needs none (Database.changeVersion). */
  changes?: ChangeFeed;
}

/** One cache entry: the value, the account it belongs to. */
interface Entry {
  value: unknown;
  accountId: string;
}

/** Per-entry bookkeeping of the LRU beyond the value's JSON (keys, the entry object, the index). */
const ENTRY_OVERHEAD_BYTES = 200;
/** Accounts invalidated while reads are in flight, remembered at most (beyond: every read in flight is dropped). */
const MAX_REMEMBERED_INVALIDATIONS = 10_000;
/** SQLite: how long one look at PRAGMA data_version holds for the reads that follow it. */
const VERSION_CHECK_MS = 1;
/** Stands for "no such row" in the cache (a missing vault is cached like a present one). */
const ABSENT = Symbol('absent');

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

function sizeOf(entry: Entry): number {
  return ENTRY_OVERHEAD_BYTES + (entry.value === ABSENT ? 0 : JSON.stringify(entry.value).length);
}

/** The cache the cached ports share: entries by key, each belonging to one account, and their invalidation. */
export class MetadataCache {
  /** Hits and misses of the cached reads, and whole-cache drops (tests, /metrics-style diagnostics). */
  readonly stats = { hits: 0, misses: 0, clears: 0 };
  private readonly cache: LRUCache<string, Entry>;
  /** Cache keys by account, so that an account's entries go together. */
  private readonly byAccount = new Map<string, Set<string>>();
  /** Increments on every invalidation; a read remembers the epoch it started in. */
  private epoch = 0;
  /** Epoch of the last whole-cache drop: reads that started before it are not kept. */
  private clearedAt = 0;
  /** Epoch of each account's last invalidation, while reads are in flight (cleared when none is). */
  private readonly invalidatedAt = new Map<string, number>();
  private inFlight = 0;
  private lastVersion: number | undefined;
  private versionCheckedAt = -Infinity;
  /**
   * Loads in flight by cache key: concurrent misses of one key share one database read, as long as nothing was
   * invalidated since it started (a read that starts after a change never gets a value read before it).
   */
  private readonly loading = new Map<string, { stamp: number; value: Promise<unknown> }>();
  private enabled: boolean;

  /**
   * `changeVersion`: the database's (Database.changeVersion, SQLite): a change of it means another connection
   * committed, and everything is dropped.
   */
  constructor(
    options: CacheOptions,
    private readonly changeVersion?: () => number,
  ) {
    this.cache = new LRUCache<string, Entry>({
      maxSize: options.maxBytes,
      // One account's list may not take more than an eighth of the cache.
      maxEntrySize: Math.max(1, Math.floor(options.maxBytes / 8)),
      sizeCalculation: sizeOf,
      ...(options.ttlMs !== undefined ? { ttl: options.ttlMs } : {}),
      dispose: (entry, key) => {
        const keys = this.byAccount.get(entry.accountId);
        keys?.delete(key);
        if (keys?.size === 0) this.byAccount.delete(entry.accountId);
      },
    });
    this.enabled = options.changes?.live ?? true;
    options.changes?.onChange((accountId) => this.invalidate(accountId));
    options.changes?.onLive((live) => {
      this.clear();
      this.enabled = live;
    });
    this.lastVersion = changeVersion?.();
  }

  /** Entries held, and their estimated size in bytes. */
  get size(): { entries: number; bytes: number } {
    return { entries: this.cache.size, bytes: this.cache.calculatedSize };
  }

  /** Drops the account's entries; reads of it that are in flight now will not be kept. */
  invalidate(accountId: string): void {
    this.epoch += 1;
    if (this.inFlight > 0) {
      if (this.invalidatedAt.size >= MAX_REMEMBERED_INVALIDATIONS) this.clear();
      else this.invalidatedAt.set(accountId, this.epoch);
    }
    const keys = this.byAccount.get(accountId);
    if (keys) for (const key of [...keys]) this.cache.delete(key);
  }

  /** Drops everything; no read in flight now will be kept. */
  clear(): void {
    this.epoch += 1;
    this.clearedAt = this.epoch;
    this.invalidatedAt.clear();
    this.stats.clears += 1;
    this.cache.clear();
  }

  /** SQLite: another connection committed since the last look → everything may be stale. */
  private checkVersion(force = false): void {
    if (this.changeVersion === undefined) return;
    const now = performance.now();
    if (!force && now - this.versionCheckedAt < VERSION_CHECK_MS) return;
    this.versionCheckedAt = now;
    const version = this.changeVersion();
    if (version !== this.lastVersion) {
      this.lastVersion = version;
      this.clear();
    }
  }

  /**
   * The cached value under `key`, else `load()`'s, kept unless its account was invalidated while it loaded.
   * `accountOf` names the account of a loaded value (undefined: do not keep it).
   */
  async cached<T>(key: string, load: () => Promise<T>, accountOf: (value: T) => string | undefined): Promise<T> {
    this.checkVersion();
    if (!this.enabled) return load();
    const hit = this.cache.get(key);
    if (hit !== undefined) {
      this.stats.hits += 1;
      return (hit.value === ABSENT ? undefined : hit.value) as T;
    }
    this.stats.misses += 1;
    const pending = this.loading.get(key);
    if (pending?.stamp === this.epoch) return pending.value as Promise<T>;
    const loading = { stamp: this.epoch, value: this.load(key, load, accountOf) };
    this.loading.set(key, loading);
    try {
      return await loading.value;
    } finally {
      if (this.loading.get(key) === loading) this.loading.delete(key);
    }
  }

  private async load<T>(key: string, load: () => Promise<T>, accountOf: (value: T) => string | undefined): Promise<T> {
    const stamp = this.epoch;
    this.inFlight += 1;
    let value: T;
    try {
      value = await load();
    } finally {
      this.inFlight -= 1;
    }
    const accountId = accountOf(value);
    if (accountId !== undefined && this.enabled && stamp >= this.clearedAt && stamp >= (this.invalidatedAt.get(accountId) ?? 0)) {
      this.checkVersion(true);
      // A version change just now dropped everything (clearedAt moved past the stamp): do not keep this one either.
      if (stamp >= this.clearedAt) {
        this.cache.set(key, { value: value === undefined ? ABSENT : deepFreeze(value), accountId });
        if (this.cache.has(key)) {
          let keys = this.byAccount.get(accountId);
          if (!keys) this.byAccount.set(accountId, (keys = new Set()));
          keys.add(key);
        }
      }
    }
    if (this.inFlight === 0) this.invalidatedAt.clear();
    return value;
  }

  /** Runs a write that changes `accountId`'s cached rows; its entries go once it is done (also when it failed). */
  async changing<T>(accountId: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } finally {
      this.invalidate(accountId);
    }
  }

  /** Runs a write whose account only its result names (undefined: nothing changed); a failure drops everything. */
  async changingResult<T extends { accountId: string } | undefined>(write: () => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await write();
    } catch (error) {
      this.clear();
      throw error;
    }
    if (result !== undefined) this.invalidate(result.accountId);
    return result;
  }

  /** The value cached under `key` without waiting, or NOT_CACHED; counted as a hit only when it answers. */
  peek<T>(key: string): T | undefined | typeof NOT_CACHED {
    this.checkVersion();
    if (!this.enabled) return NOT_CACHED;
    const hit = this.cache.get(key);
    if (hit === undefined) return NOT_CACHED;
    this.stats.hits += 1;
    return (hit.value === ABSENT ? undefined : hit.value) as T | undefined;
  }
}

/** API keys by hash, cached; creating or revoking a key drops its account's entries. */
class CachedKeyStore implements KeyStore {
  constructor(
    private readonly inner: KeyStore,
    private readonly cache: MetadataCache,
  ) {}

  /** Counted as a hit only when it answers (KeyStore.peekApiKeyByHash). */
  peekApiKeyByHash(keyHash: string): ApiKey | undefined | typeof NOT_CACHED {
    return this.cache.peek<ApiKey>(`k:${keyHash}`);
  }

  findApiKeyByHash(keyHash: string): Promise<ApiKey | undefined> {
    return this.cache.cached(
      `k:${keyHash}`,
      () => this.inner.findApiKeyByHash(keyHash),
      (key) => key?.accountId,
    );
  }

  createApiKey(key: ApiKey, keyHash: string): Promise<void> {
    return this.cache.changing(key.accountId, () => this.inner.createApiKey(key, keyHash));
  }

  async revokeApiKey(keyId: string, at: number): Promise<boolean> {
    let revoked: boolean;
    let owner: ApiKey | undefined;
    try {
      revoked = await this.inner.revokeApiKey(keyId, at);
      owner = revoked ? await this.inner.getApiKey(keyId) : undefined;
    } catch (error) {
      this.cache.clear();
      throw error;
    }
    if (owner) this.cache.invalidate(owner.accountId);
    else if (revoked) this.cache.clear();
    return revoked;
  }

  // Stryker disable all: plain delegation, checked by the shared store suite (test/backends/store.test.ts), not a cache rule.
  listApiKeys: KeyStore['listApiKeys'] = (accountId) => this.inner.listApiKeys(accountId);
  getApiKey: KeyStore['getApiKey'] = (keyId) => this.inner.getApiKey(keyId);
  // Stryker restore all
}

/** Accounts by id, cached; every change of an account drops its entries (a plan change: everything). */
class CachedAccountStore implements AccountStore {
  constructor(
    private readonly inner: AccountStore,
    private readonly cache: MetadataCache,
  ) {}

  getAccount(id: string): Promise<Account | undefined> {
    return this.cache.cached(
      `a:${id}`,
      () => this.inner.getAccount(id),
      (account) => account?.id,
    );
  }

  createAccount(account: Account): Promise<Account> {
    return this.cache.changing(account.id, () => this.inner.createAccount(account));
  }

  async setPlan(accountId: string, plan: Account['plan']): Promise<boolean> {
    // The owner's host accounts change with it: an operator's rare change, so everything goes rather than a list.
    try {
      return await this.inner.setPlan(accountId, plan);
    } finally {
      this.cache.clear();
    }
  }

  setOperatorLabel(accountId: string, label: string | null): Promise<boolean> {
    return this.cache.changing(accountId, () => this.inner.setOperatorLabel(accountId, label));
  }

  setQuota(accountId: string, quota: number | null | undefined): Promise<boolean> {
    return this.cache.changing(accountId, () => this.inner.setQuota(accountId, quota));
  }

  setDeletionGrace(accountId: string, days: number): Promise<boolean> {
    return this.cache.changing(accountId, () => this.inner.setDeletionGrace(accountId, days));
  }

  // Stryker disable all: plain delegation, checked by the shared store suite (test/backends/store.test.ts), not a cache rule.
  listAccounts: AccountStore['listAccounts'] = () => this.inner.listAccounts();
  listHostAccounts: AccountStore['listHostAccounts'] = (ownerAccountId) => this.inner.listHostAccounts(ownerAccountId);
  // Stryker restore all
}

/** Vaults by account, cached (a missing one too); every change of the vault drops its account's entries. */
class CachedVaultStore implements VaultStore {
  constructor(
    private readonly inner: VaultStore,
    private readonly cache: MetadataCache,
  ) {}

  getVault(accountId: string): Promise<Vault | undefined> {
    return this.cache.cached(
      `v:${accountId}`,
      () => this.inner.getVault(accountId),
      () => accountId,
    );
  }

  createVault(accountId: string, vault: Vault): Promise<boolean> {
    return this.cache.changing(accountId, () => this.inner.createVault(accountId, vault));
  }

  replaceVault(...args: Parameters<VaultStore['replaceVault']>): Promise<boolean> {
    return this.cache.changing(args[0], () => this.inner.replaceVault(...args));
  }

  deleteVault(...args: Parameters<VaultStore['deleteVault']>): Promise<boolean> {
    return this.cache.changing(args[0], () => this.inner.deleteVault(...args));
  }

  restoreVault(...args: Parameters<VaultStore['restoreVault']>): Promise<Vault | undefined> {
    return this.cache.changing(args[0], () => this.inner.restoreVault(...args));
  }

  // Stryker disable all: plain delegation, checked by the shared store suite (test/backends/store.test.ts), not a cache rule.
  listVaultHistory: VaultStore['listVaultHistory'] = (accountId, now) => this.inner.listVaultHistory(accountId, now);
  pruneVaultHistory: VaultStore['pruneVaultHistory'] = (now) => this.inner.pruneVaultHistory(now);
  // Stryker restore all
}

/** An account's list of backups (by statuses), cached; creating or changing a backup drops its account's entries. */
class CachedBackupStore implements BackupStore {
  constructor(
    private readonly inner: BackupStore,
    private readonly cache: MetadataCache,
  ) {}

  listBackups(accountId: string, statuses: readonly BackupStatus[]): Promise<Backup[]> {
    return this.cache.cached(
      `l:${accountId}:${statuses.join(',')}`,
      () => this.inner.listBackups(accountId, statuses),
      () => accountId,
    );
  }

  createBackup(...args: Parameters<BackupStore['createBackup']>): ReturnType<BackupStore['createBackup']> {
    return this.cache.changing(args[0], () => this.inner.createBackup(...args));
  }

  updateBackup(...args: Parameters<BackupStore['updateBackup']>): Promise<Backup | undefined> {
    return this.cache.changingResult(() => this.inner.updateBackup(...args));
  }

  /** Also changes the account (its last READY): the account's entries go with the list. */
  markReady(...args: Parameters<BackupStore['markReady']>): Promise<Backup | undefined> {
    return this.cache.changingResult(() => this.inner.markReady(...args));
  }

  // Stryker disable all: plain delegation, checked by the shared store suite (test/backends/store.test.ts), not a cache rule.
  getBackup: BackupStore['getBackup'] = (id) => this.inner.getBackup(id);
  listSweepCandidates: BackupStore['listSweepCandidates'] = (now, accountId) => this.inner.listSweepCandidates(now, accountId);
  liveBlobKeys: BackupStore['liveBlobKeys'] = (blobKeys) => this.inner.liveBlobKeys(blobKeys);
  // Stryker restore all
}

/** The ports the metadata cache serves reads of, and the cache itself (its counters for /metrics, its invalidation). */
export interface CachedPorts extends Pick<Stores, 'keys' | 'accounts' | 'vaults' | 'backups'> {
  cache: MetadataCache;
}

/**
 * The keys, accounts, vaults and backups of `stores` behind one metadata cache (the database's change version, where
 * it has one, empties it when another connection commits). Every other port of `stores` stays as it is: none of them
 * changes a cached row.
 */
export function cachedPorts(stores: Stores, options: CacheOptions): CachedPorts {
  const changeVersion = stores.database.changeVersion?.bind(stores.database);
  const cache = new MetadataCache(options, changeVersion);
  return {
    cache,
    keys: new CachedKeyStore(stores.keys, cache),
    accounts: new CachedAccountStore(stores.accounts, cache),
    vaults: new CachedVaultStore(stores.vaults, cache),
    backups: new CachedBackupStore(stores.backups, cache),
  };
}
