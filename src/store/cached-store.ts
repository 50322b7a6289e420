/**
 * The reads every API request makes (API key → key record, account, vault, an account's list of backups) served
 * from this process's memory, over any Store: a decorator, so the services see one Store and the shared store suite
 * runs against it too. Reads far outnumber changes (bench P3, BENCHMARKS.md#p3).
 *
 * Correctness rests on invalidation, never on age alone:
 * - a change made through this store invalidates the changed account's entries before the write returns;
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
import { type Account, type ApiKey, type Backup, NOT_CACHED, type Store, type Vault } from './store.js';

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
  /** Changes made elsewhere (PostgreSQL: LISTEN/NOTIFY); SQLite needs none (Store.changeVersion). */
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

export class CachedStore implements Store {
  readonly kind: Store['kind'];
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

  constructor(
    private readonly inner: Store,
    options: CacheOptions,
  ) {
    this.kind = inner.kind;
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
    this.lastVersion = inner.changeVersion?.();
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
    if (this.inner.changeVersion === undefined) return;
    const now = performance.now();
    if (!force && now - this.versionCheckedAt < VERSION_CHECK_MS) return;
    this.versionCheckedAt = now;
    const version = this.inner.changeVersion();
    if (version !== this.lastVersion) {
      this.lastVersion = version;
      this.clear();
    }
  }

  /**
   * The cached value under `key`, else `load()`'s, kept unless its account was invalidated while it loaded.
   * `accountOf` names the account of a loaded value (undefined: do not keep it).
   */
  private async cached<T>(key: string, load: () => Promise<T>, accountOf: (value: T) => string | undefined): Promise<T> {
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
  private async changing<T>(accountId: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } finally {
      this.invalidate(accountId);
    }
  }

  /** Runs a write whose account only its result names (undefined: nothing changed); a failure drops everything. */
  private async changingResult<T extends { accountId: string } | undefined>(write: () => Promise<T>): Promise<T> {
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

  // ---- cached reads ----

  /** Counted as a hit only when it answers (Store.peekApiKeyByHash). */
  peekApiKeyByHash(keyHash: string): ApiKey | undefined | typeof NOT_CACHED {
    this.checkVersion();
    if (!this.enabled) return NOT_CACHED;
    const hit = this.cache.get(`k:${keyHash}`);
    if (hit === undefined) return NOT_CACHED;
    this.stats.hits += 1;
    return (hit.value === ABSENT ? undefined : hit.value) as ApiKey | undefined;
  }

  findApiKeyByHash(keyHash: string): Promise<ApiKey | undefined> {
    return this.cached(
      `k:${keyHash}`,
      () => this.inner.findApiKeyByHash(keyHash),
      (key) => key?.accountId,
    );
  }

  getAccount(id: string): Promise<Account | undefined> {
    return this.cached(
      `a:${id}`,
      () => this.inner.getAccount(id),
      (account) => account?.id,
    );
  }

  getVault(accountId: string): Promise<Vault | undefined> {
    return this.cached(
      `v:${accountId}`,
      () => this.inner.getVault(accountId),
      () => accountId,
    );
  }

  listBackups(accountId: string, statuses: readonly BackupStatus[]): Promise<Backup[]> {
    return this.cached(
      `l:${accountId}:${statuses.join(',')}`,
      () => this.inner.listBackups(accountId, statuses),
      () => accountId,
    );
  }

  // ---- writes that change cached rows ----

  createAccount(account: Account): Promise<Account> {
    return this.changing(account.id, () => this.inner.createAccount(account));
  }

  async setPlan(accountId: string, plan: Account['plan']): Promise<boolean> {
    // The owner's host accounts change with it: an operator's rare change, so everything goes rather than a list.
    try {
      return await this.inner.setPlan(accountId, plan);
    } finally {
      this.clear();
    }
  }

  setOperatorLabel(accountId: string, label: string | null): Promise<boolean> {
    return this.changing(accountId, () => this.inner.setOperatorLabel(accountId, label));
  }

  setQuota(accountId: string, quota: number | null | undefined): Promise<boolean> {
    return this.changing(accountId, () => this.inner.setQuota(accountId, quota));
  }

  setDeletionGrace(accountId: string, days: number): Promise<boolean> {
    return this.changing(accountId, () => this.inner.setDeletionGrace(accountId, days));
  }

  createApiKey(key: ApiKey, keyHash: string): Promise<void> {
    return this.changing(key.accountId, () => this.inner.createApiKey(key, keyHash));
  }

  async revokeApiKey(keyId: string, at: number): Promise<boolean> {
    let revoked: boolean;
    let owner: ApiKey | undefined;
    try {
      revoked = await this.inner.revokeApiKey(keyId, at);
      owner = revoked ? await this.inner.getApiKey(keyId) : undefined;
    } catch (error) {
      this.clear();
      throw error;
    }
    if (owner) this.invalidate(owner.accountId);
    else if (revoked) this.clear();
    return revoked;
  }

  createVault(accountId: string, vault: Vault): Promise<boolean> {
    return this.changing(accountId, () => this.inner.createVault(accountId, vault));
  }

  replaceVault(...args: Parameters<Store['replaceVault']>): Promise<boolean> {
    return this.changing(args[0], () => this.inner.replaceVault(...args));
  }

  deleteVault(...args: Parameters<Store['deleteVault']>): Promise<boolean> {
    return this.changing(args[0], () => this.inner.deleteVault(...args));
  }

  restoreVault(...args: Parameters<Store['restoreVault']>): Promise<Vault | undefined> {
    return this.changing(args[0], () => this.inner.restoreVault(...args));
  }

  createBackup(...args: Parameters<Store['createBackup']>): ReturnType<Store['createBackup']> {
    return this.changing(args[0], () => this.inner.createBackup(...args));
  }

  updateBackup(...args: Parameters<Store['updateBackup']>): Promise<Backup | undefined> {
    return this.changingResult(() => this.inner.updateBackup(...args));
  }

  markReady(...args: Parameters<Store['markReady']>): Promise<Backup | undefined> {
    return this.changingResult(() => this.inner.markReady(...args));
  }

  // ---- everything else goes straight through ----
  // Stryker disable all: plain delegation, checked by the shared store suite (test/backends/store.test.ts), not a cache rule.

  queryCounts: Store['queryCounts'] = () => this.inner.queryCounts();
  migrate: Store['migrate'] = () => this.inner.migrate();
  async close(): Promise<void> {
    this.clear();
    await this.inner.close();
  }
  ping: Store['ping'] = () => this.inner.ping();
  listAccounts: Store['listAccounts'] = () => this.inner.listAccounts();
  usage: Store['usage'] = (now, accountId, since) => this.inner.usage(now, accountId, since);
  fleetUsage: Store['fleetUsage'] = (now, accountId) => this.inner.fleetUsage(now, accountId);
  reserveUpload: Store['reserveUpload'] = (reservation, now, size, quotaOf) => this.inner.reserveUpload(reservation, now, size, quotaOf);
  releaseUpload: Store['releaseUpload'] = (id) => this.inner.releaseUpload(id);
  listHostAccounts: Store['listHostAccounts'] = (ownerAccountId) => this.inner.listHostAccounts(ownerAccountId);
  listApiKeys: Store['listApiKeys'] = (accountId) => this.inner.listApiKeys(accountId);
  getApiKey: Store['getApiKey'] = (keyId) => this.inner.getApiKey(keyId);
  createLoginLink: Store['createLoginLink'] = (link, tokenHash) => this.inner.createLoginLink(link, tokenHash);
  consumeLoginLink: Store['consumeLoginLink'] = (tokenHash, now) => this.inner.consumeLoginLink(tokenHash, now);
  createSession: Store['createSession'] = (session, tokenHash) => this.inner.createSession(session, tokenHash);
  findSessionByHash: Store['findSessionByHash'] = (tokenHash) => this.inner.findSessionByHash(tokenHash);
  revokeSession: Store['revokeSession'] = (sessionId, at) => this.inner.revokeSession(sessionId, at);
  pruneSessions: Store['pruneSessions'] = (before) => this.inner.pruneSessions(before);
  createOperatorLink: Store['createOperatorLink'] = (link, tokenHash) => this.inner.createOperatorLink(link, tokenHash);
  consumeOperatorLink: Store['consumeOperatorLink'] = (tokenHash, now) => this.inner.consumeOperatorLink(tokenHash, now);
  createOperatorSession: Store['createOperatorSession'] = (session, tokenHash) => this.inner.createOperatorSession(session, tokenHash);
  findOperatorSessionByHash: Store['findOperatorSessionByHash'] = (tokenHash) => this.inner.findOperatorSessionByHash(tokenHash);
  revokeOperatorSession: Store['revokeOperatorSession'] = (sessionId, at) => this.inner.revokeOperatorSession(sessionId, at);
  appliedMigrations: Store['appliedMigrations'] = () => this.inner.appliedMigrations();
  listVaultHistory: Store['listVaultHistory'] = (accountId, now) => this.inner.listVaultHistory(accountId, now);
  pruneVaultHistory: Store['pruneVaultHistory'] = (now) => this.inner.pruneVaultHistory(now);
  getBackup: Store['getBackup'] = (id) => this.inner.getBackup(id);
  listSweepCandidates: Store['listSweepCandidates'] = (now, accountId) => this.inner.listSweepCandidates(now, accountId);
  liveBlobKeys: Store['liveBlobKeys'] = (blobKeys) => this.inner.liveBlobKeys(blobKeys);
  appendAudit: Store['appendAudit'] = (entry, keep) => this.inner.appendAudit(entry, keep);
  listAudit: Store['listAudit'] = (accountId, limit) => this.inner.listAudit(accountId, limit);
  countSignInAttempt: Store['countSignInAttempt'] = (address, now, windowMs) => this.inner.countSignInAttempt(address, now, windowMs);
  pruneSignInAttempts: Store['pruneSignInAttempts'] = (before) => this.inner.pruneSignInAttempts(before);
  ensureSetting: Store['ensureSetting'] = (name, initial, now) => this.inner.ensureSetting(name, initial, now);
  putSetting: Store['putSetting'] = (name, value, now) => this.inner.putSetting(name, value, now);
  getSetting: Store['getSetting'] = (name) => this.inner.getSetting(name);
  addMultipartUpload: Store['addMultipartUpload'] = (backupId, uploadId, now) => this.inner.addMultipartUpload(backupId, uploadId, now);
  countMultipartUploads: Store['countMultipartUploads'] = (backupId) => this.inner.countMultipartUploads(backupId);
  putPartSize: Store['putPartSize'] = (backupId, uploadId, partNumber, size) =>
    this.inner.putPartSize(backupId, uploadId, partNumber, size);
  slotBytes: Store['slotBytes'] = (backupId, except) => this.inner.slotBytes(backupId, except);
  removeMultipartUpload: Store['removeMultipartUpload'] = (uploadId) => this.inner.removeMultipartUpload(uploadId);
  pruneMultipartUploads: Store['pruneMultipartUploads'] = () => this.inner.pruneMultipartUploads();
  tryExclusive<T>(name: string, task: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
    return this.inner.tryExclusive(name, task);
  }
}
