/**
 * ONE contract suite for the metadata Store, run against every engine: embedded SQLite and the real
 * PostgreSQL (its own schema per run). Concurrency cases use several independent handles on the same
 * database ("nodes": separate connection pools for PostgreSQL).
 */
import { beforeAll, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import { decideCreate, type BackupStatus } from '../../src/domain/backups.js';
import { PgStatusBus } from '../../src/events/pg-bus.js';
import { type CacheOptions, cachedPorts } from '../../src/store/cached-store.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import { openSqliteStores } from '../../src/store/sqlite.js';
import { SQLITE_DRIVERS, type SqliteDriverName, sqliteDrivers } from '../../src/store/sqlite-driver.js';
import type { AuditEntry } from '../../src/domain/audit.js';
import type { Scope } from '../../src/domain/scopes.js';
import type { Account, Backup, Vault } from '../../src/domain/entities.js';
import type { Stores } from '../../src/store/ports/stores.js';
import type { VaultKeep } from '../../src/store/ports/vaults.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { lacking } from '../helpers/required.js';
import { tempDir } from '../helpers/tmp.js';
import { newSlot } from '../../src/services/backups.js';
import { describeEngines, type Engine } from './engine.js';

/** setUp opens the database for the suite and returns the main handle. */
interface StoreEngine extends Engine<Stores> {
  /** What the database port calls its engine (Database.kind). */
  kind: Stores['database']['kind'];
  /** Another handle on the same database, as a second node holds it. */
  peer(): Promise<Stores>;
  /** PostgreSQL: the connection URL of the suite's schema. */
  url?(): string;
}

/**
 * Every SQLite driver this runtime has runs the suite (node:sqlite from Node 22.16, better-sqlite3 where it is
 * installed and safe: src/store/sqlite-driver.ts); one that is not is listed as skipped, with the reason.
 */
const drivers = await sqliteDrivers();

function sqliteEngine(driver: SqliteDriverName): StoreEngine {
  let store: Stores;
  const missing = drivers.unavailable.get(driver);
  return {
    name: `sqlite (${driver === 'node' ? 'node:sqlite' : driver}${missing === undefined ? '' : `, skipped: ${missing}`})`,
    kind: 'sqlite',
    skip: lacking(missing === undefined, `sqlite:${driver}`),
    async setUp() {
      store = await openSqliteStores(tempDir('coffer-store-'), driver);
      await store.database.migrate();
      return store;
    },
    // Both drivers are synchronous: a second connection in the same process would block the event loop
    // on the file lock, and SQLite serves one node anyway. The peer is the same handle.
    async peer() {
      return store;
    },
    async tearDown() {
      await store.database.close();
    },
  };
}

function postgresEngine(): StoreEngine {
  let schema: TestSchema;
  const opened: Stores[] = [];
  return {
    name: 'postgres',
    kind: 'postgres',
    skip: skipPg,
    async setUp() {
      requirePg();
      schema = await createTestSchema('coffer_store');
      const store = openPostgresStores(schema.url);
      opened.push(store);
      await store.database.migrate();
      return store;
    },
    url: () => schema.url,
    async peer() {
      const store = openPostgresStores(schema.url);
      opened.push(store);
      await store.database.migrate(); // a second node starting: migrations are idempotent
      return store;
    },
    async tearDown() {
      await Promise.all(opened.map((store) => store.database.close()));
      await schema?.drop();
    },
  };
}

/**
 * The same engine behind the metadata cache (src/store/cached-store.ts), as the server composes it: the contract
 * holds through the cache too. PostgreSQL handles hear each other's changes through their own LISTEN sessions.
 */
function cachedEngine(inner: StoreEngine): StoreEngine {
  const buses: PgStatusBus[] = [];
  // The cached ports in place of the engine's own, every other port straight through.
  const cached = (store: Stores, options: CacheOptions): Stores => {
    const { cache: _, ...ports } = cachedPorts(store, options);
    return { ...store, ...ports };
  };
  const wrap = async (store: Stores): Promise<Stores> => {
    if (store.database.kind === 'sqlite') return cached(store, { maxBytes: 1024 * 1024 });
    const bus = new PgStatusBus({ connectionString: inner.url!(), load: (id) => store.backups.getBackup(id) });
    buses.push(bus);
    await bus.start();
    return cached(store, { maxBytes: 1024 * 1024, ttlMs: 1000, changes: bus });
  };
  let main: Stores;
  return {
    ...inner,
    name: `${inner.name}, cached`,
    async setUp() {
      main = await wrap(await inner.setUp());
      return main;
    },
    async peer() {
      const peer = await inner.peer();
      // SQLite's peer is the same handle, so the same cache.
      return inner.kind === 'sqlite' ? main : wrap(peer);
    },
    async tearDown() {
      await Promise.all(buses.map((bus) => bus.close()));
      await inner.tearDown();
    },
  };
}

const T0 = Date.parse('2026-11-21T10:00:00.000Z');
const HOUR = 3_600_000;

function vault(fill = 'A'): Vault {
  return {
    cryptoVersion: 'v1',
    kdf: { salt: fill.repeat(24), opslimit: 4_294_967_295, memlimit: 4_398_046_511_104 },
    wrappedMasterKey: fill.repeat(64),
    wrappedMasterKeyNonce: fill.repeat(32),
    updatedAt: T0,
  };
}

function backup(accountId: string, overrides: Partial<Backup> = {}): Backup {
  const id = overrides.id ?? uuidv7();
  return { ...newSlot(id, accountId, T0, T0 + HOUR), ...overrides };
}

const plainEngines = [...SQLITE_DRIVERS.map(sqliteEngine), postgresEngine()];
// The cache over the first SQLite driver that runs here, and over PostgreSQL.
const cachedEngines = [plainEngines.find((engine) => engine.kind === 'sqlite' && !engine.skip), plainEngines.at(-1)!]
  .filter((engine) => engine !== undefined)
  .map(cachedEngine);

describeEngines('Store backend', [...plainEngines, ...cachedEngines], (engine, backend) => {
  let store: Stores;
  beforeAll(() => {
    store = backend();
  });

  async function newAccount(plan: Account['plan'] = 'free', withVault = true): Promise<Account> {
    const account: Account = { id: uuidv7(), plan, createdAt: T0, lastReadyCreatedAt: null, deletionGraceDays: 0 };
    await store.accounts.createAccount(account);
    if (withVault) await store.vaults.createVault(account.id, vault());
    return account;
  }

  /** Inserts a record through createBackup with an always-allow decision. */
  async function insert(record: Backup): Promise<Backup> {
    const decision = await store.backups.createBackup(record.accountId, record.createdAt, () => ({ allowed: true }), record);
    expect(decision.allowed).toBe(true);
    return record;
  }

  it('migrates idempotently and answers ping', async () => {
    await store.database.migrate();
    await store.database.ping();
    expect(store.database.kind).toBe(engine.kind);
  });

  it('accounts: create, read, list, set plan; times come back as numbers', async () => {
    const account = await newAccount('plus', false);
    expect(await store.accounts.getAccount(account.id)).toEqual(account);
    expect(await store.accounts.getAccount(uuidv7())).toBeUndefined();
    expect((await store.accounts.listAccounts()).map((a) => a.id)).toContain(account.id);
    expect(await store.accounts.setPlan(account.id, 'pro')).toBe(true);
    expect(await store.accounts.setPlan(uuidv7(), 'pro')).toBe(false);
    const read = await store.accounts.getAccount(account.id);
    expect(read?.plan).toBe('pro');
    expect(typeof read?.createdAt).toBe('number');
  });

  it('API keys: stored by hash, listed, revoked once', async () => {
    const account = await newAccount();
    const key = {
      id: uuidv7(),
      accountId: account.id,
      scopes: ['backups:read', 'backups:write'] as ('backups:read' | 'backups:write')[],
      createdAt: T0,
      expiresAt: T0 + 30 * 24 * HOUR,
      revokedAt: null,
      appendOnly: false,
    };
    const hash = `hash-${key.id}`;
    await store.keys.createApiKey(key, hash);
    expect(await store.keys.findApiKeyByHash(hash)).toEqual(key);
    expect(await store.keys.findApiKeyByHash('nope')).toBeUndefined();
    expect((await store.keys.listApiKeys(account.id)).map((k) => k.id)).toEqual([key.id]);
    expect(await store.keys.revokeApiKey(key.id, T0 + 1)).toBe(true);
    expect(await store.keys.revokeApiKey(key.id, T0 + 2)).toBe(false);
    expect((await store.keys.findApiKeyByHash(hash))?.revokedAt).toBe(T0 + 1);
    // A key made in a console session keeps that session's sign-in time (migration 0008).
    const minted = { ...key, id: uuidv7(), mintedFreshAt: T0 - 5 };
    await store.keys.createApiKey(minted, `hash-${minted.id}`);
    expect(await store.keys.findApiKeyByHash(`hash-${minted.id}`)).toEqual(minted);
    await expect(store.keys.createApiKey({ ...key, id: uuidv7() }, hash)).rejects.toThrow();
  });

  it('vaults: create once, replace (creation time kept), delete; 2^42 memlimit survives', async () => {
    const account = await newAccount('free', false);
    expect(await store.vaults.getVault(account.id)).toBeUndefined();
    expect(await store.vaults.replaceVault(account.id, vault('B'))).toBe(false);
    expect(await store.vaults.createVault(account.id, vault('A'))).toBe(true);
    expect(await store.vaults.createVault(account.id, vault('B'))).toBe(false);
    expect(await store.vaults.getVault(account.id)).toEqual({ ...vault('A'), createdAt: T0 });
    expect(await store.vaults.replaceVault(account.id, { ...vault('C'), updatedAt: T0 + 5 })).toBe(true);
    expect(await store.vaults.getVault(account.id)).toEqual({ ...vault('C'), updatedAt: T0 + 5, createdAt: T0 });
    expect(await store.vaults.deleteVault(account.id)).toBe(true);
    expect(await store.vaults.deleteVault(account.id)).toBe(false);
  });

  it('replaceVault with expected material is a compare-and-swap: only over exactly that material', async () => {
    const account = await newAccount('free', false);
    expect(await store.vaults.replaceVault(account.id, vault('B'), { expected: vault('A') })).toBe(false);
    expect(await store.vaults.createVault(account.id, vault('A'))).toBe(true);
    // Any one field of the material differing is another vault (updatedAt is not material).
    const others = [
      vault('X'),
      { ...vault('A'), kdf: { ...vault('A').kdf, opslimit: vault('A').kdf.opslimit + 1 } },
      { ...vault('A'), kdf: { ...vault('A').kdf, memlimit: vault('A').kdf.memlimit + 1 } },
      { ...vault('A'), wrappedMasterKeyNonce: 'other-nonce' },
    ];
    for (const other of others) expect(await store.vaults.replaceVault(account.id, vault('B'), { expected: other })).toBe(false);
    expect(await store.vaults.getVault(account.id)).toEqual({ ...vault('A'), createdAt: T0 });
    expect(
      await store.vaults.replaceVault(
        account.id,
        { ...vault('B'), updatedAt: T0 + 7 },
        { expected: { ...vault('A'), updatedAt: T0 + 99 } },
      ),
    ).toBe(true);
    expect(await store.vaults.getVault(account.id)).toEqual({ ...vault('B'), updatedAt: T0 + 7, createdAt: T0 });
    // Two swaps from the same material, at once: exactly one lands.
    const raced = await Promise.all(
      [vault('C'), vault('D')].map((next) => store.vaults.replaceVault(account.id, next, { expected: vault('B') })),
    );
    expect(raced.filter(Boolean)).toHaveLength(1);
    expect((await store.vaults.getVault(account.id))?.wrappedMasterKey).toBe((raced[0] ? vault('C') : vault('D')).wrappedMasterKey);
  });

  it('createBackup hands the snapshot to the decision and inserts only when allowed', async () => {
    const noVault = await newAccount('free', false);
    const refused = await store.backups.createBackup(noVault.id, T0, (s) => decideCreate(s, T0), backup(noVault.id));
    expect(refused).toEqual({ allowed: false, reason: 'vault_not_initialized' });
    expect(await store.backups.listBackups(noVault.id, ['PENDING_UPLOAD'])).toEqual([]);

    const account = await newAccount('pro');
    const first = backup(account.id);
    const snapshots: unknown[] = [];
    const decide = (s: Parameters<typeof decideCreate>[0]) => {
      snapshots.push(s);
      return decideCreate(s, T0);
    };
    expect(await store.backups.createBackup(account.id, T0, decide, first)).toEqual({ allowed: true });
    expect(await store.backups.getBackup(first.id)).toEqual(first);
    expect(await store.backups.createBackup(account.id, T0, decide, backup(account.id))).toEqual({
      allowed: false,
      reason: 'upload_in_progress',
      backupId: first.id,
    });
    expect(snapshots[0]).toEqual({ plan: 'pro', vaultInitialized: true, inFlightBackupId: null, lastReadyCreatedAt: null });
    // An expired slot no longer counts as in flight.
    const later = T0 + 2 * HOUR;
    const second = backup(account.id, { createdAt: later, expiresAt: later + HOUR, updatedAt: later });
    expect(await store.backups.createBackup(account.id, later, (s) => decideCreate(s, later), second)).toEqual({ allowed: true });
    await expect(store.backups.createBackup(uuidv7(), T0, () => ({ allowed: true }), backup(uuidv7()))).rejects.toThrow();
  });

  it('concurrent creates for one account from several nodes: exactly one is allowed', async () => {
    const account = await newAccount();
    const nodes = [store, await engine.peer(), await engine.peer()];
    const attempts = Array.from({ length: 12 }, (_, i) =>
      nodes[i % nodes.length]!.backups.createBackup(account.id, T0, (s) => decideCreate(s, T0), backup(account.id)),
    );
    const decisions = await Promise.all(attempts);
    expect(decisions.filter((d) => d.allowed)).toHaveLength(1);
    expect(decisions.filter((d) => !d.allowed && d.reason === 'upload_in_progress')).toHaveLength(11);
    expect(await store.backups.listBackups(account.id, ['PENDING_UPLOAD'])).toHaveLength(1);
  });

  it('lists newest first, filtered by status', async () => {
    const account = await newAccount();
    const a = await insert(backup(account.id, { createdAt: T0, status: 'READY' }));
    const b = await insert(backup(account.id, { createdAt: T0 + 10, status: 'DELETED' }));
    const c = await insert(backup(account.id, { createdAt: T0 + 20, status: 'FAILED' }));
    expect((await store.backups.listBackups(account.id, ['READY', 'FAILED'])).map((x) => x.id)).toEqual([c.id, a.id]);
    expect((await store.backups.listBackups(account.id, ['DELETED'])).map((x) => x.id)).toEqual([b.id]);
  });

  it('updateBackup is a compare-and-set on status (and size); markReady moves the cadence clock', async () => {
    const account = await newAccount();
    const record = await insert(backup(account.id, { createdAt: T0 + 100 }));
    expect(await store.backups.updateBackup(record.id, { statuses: ['UPLOADED'] }, { status: 'READY' })).toBeUndefined();
    const uploaded = await store.backups.updateBackup(
      record.id,
      { statuses: ['PENDING_UPLOAD'] },
      { status: 'UPLOADED', blobKey: `${record.blobPath}/x.bin`, ciphertextSizeBytes: 52_428_800, updatedAt: T0 + 200 },
    );
    expect(uploaded).toMatchObject({ status: 'UPLOADED', ciphertextSizeBytes: 52_428_800, updatedAt: T0 + 200 });
    expect(await store.backups.markReady(record.id, { statuses: ['UPLOADED'], ciphertextSizeBytes: 1 }, {})).toBeUndefined();
    const ready = await store.backups.markReady(
      record.id,
      { statuses: ['UPLOADED'], ciphertextSizeBytes: 52_428_800 },
      { wrappedDek: 'dek', plaintextSizeBytes: 9_007_199_254_740_991, expiresAt: T0 + 7 * 24 * HOUR, updatedAt: T0 + 300 },
    );
    expect(ready).toMatchObject({ status: 'READY', wrappedDek: 'dek', plaintextSizeBytes: 9_007_199_254_740_991 });
    expect((await store.accounts.getAccount(account.id))?.lastReadyCreatedAt).toBe(T0 + 100);

    // An older backup reaching READY does not move the cadence clock back.
    const older = await insert(
      backup(account.id, { createdAt: T0 + 50, status: 'UPLOADED', ciphertextSizeBytes: 1, expiresAt: T0 + 10 * HOUR }),
    );
    await store.backups.markReady(older.id, { statuses: ['UPLOADED'] }, {});
    expect((await store.accounts.getAccount(account.id))?.lastReadyCreatedAt).toBe(T0 + 100);
  });

  it('concurrent compare-and-set: one winner', async () => {
    const account = await newAccount();
    const record = await insert(backup(account.id));
    const nodes = [store, await engine.peer()];
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        nodes[i % 2]!.backups.updateBackup(record.id, { statuses: ['PENDING_UPLOAD'] }, { status: 'UPLOADED', blobKey: `k${i}` }),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  it('sweep candidates: expired in-flight, FAILED, expired READY, DELETING', async () => {
    const account = await newAccount();
    const now = T0 + 5 * HOUR;
    const make = (status: BackupStatus, expiresAt: number) => insert(backup(account.id, { status, expiresAt }));
    const due = [
      await make('PENDING_UPLOAD', now),
      await make('UPLOADED', now - 1),
      await make('FAILED', now + HOUR),
      await make('READY', now - HOUR),
      await make('DELETING', now + HOUR),
      // A delete whose grace ended.
      await insert(backup(account.id, { status: 'DELETING', expiresAt: now + HOUR, purgeAfter: now })),
    ];
    // A delete still in its grace is left alone.
    await insert(backup(account.id, { status: 'DELETING', expiresAt: now + HOUR, purgeAfter: now + 1 }));
    await make('PENDING_UPLOAD', now + 1);
    await make('READY', now + HOUR);
    await make('DELETED', now - HOUR);
    // Object Lock: a DELETED record whose object waits for its lock is due once the lock has ended.
    due.push(await insert(backup(account.id, { status: 'DELETED', expiresAt: now - HOUR, lockedUntil: now })));
    await insert(backup(account.id, { status: 'DELETED', expiresAt: now - HOUR, lockedUntil: now + 1 }));
    const ids = (await store.backups.listSweepCandidates(now, account.id)).map((b) => b.id).sort();
    expect(ids).toEqual(due.map((b) => b.id).sort());
    expect((await store.backups.listSweepCandidates(now)).map((b) => b.id)).toEqual(expect.arrayContaining(ids));
  });

  it('deletion grace: 0 by default, set per account; the schedule condition guards compare-and-set', async () => {
    const account = await newAccount();
    expect((await store.accounts.getAccount(account.id))?.deletionGraceDays).toBe(0);
    expect(await store.accounts.setDeletionGrace(account.id, 7)).toBe(true);
    expect(await store.accounts.setDeletionGrace(uuidv7(), 7)).toBe(false);
    expect((await store.accounts.getAccount(account.id))?.deletionGraceDays).toBe(7);

    const record = await insert(backup(account.id, { status: 'READY', expiresAt: T0 + 100 * HOUR, blobKey: 'backups/g/1.bin' }));
    const due = T0 + 10 * HOUR;
    const scheduled = await store.backups.updateBackup(record.id, { statuses: ['READY'] }, { status: 'DELETING', purgeAfter: due });
    expect(scheduled).toMatchObject({ status: 'DELETING', purgeAfter: due, deletedAt: null });
    expect(await store.backups.listBackups(account.id, ['DELETING'])).toEqual([scheduled]);
    // Restorable only while the grace lasts: a condition "due after now" fails once it has passed.
    expect(
      await store.backups.updateBackup(record.id, { statuses: ['DELETING'], scheduled: { dueAfter: due } }, { status: 'READY' }),
    ).toBeUndefined();
    // The sweeper's claim (due by now) fails before the grace ends.
    expect(
      await store.backups.updateBackup(record.id, { statuses: ['DELETING'], scheduled: { dueBy: due - 1 } }, { purgeAfter: null }),
    ).toBeUndefined();
    const restored = await store.backups.updateBackup(
      record.id,
      { statuses: ['DELETING'], scheduled: { dueAfter: due - 1 } },
      { status: 'READY', purgeAfter: null },
    );
    expect(restored).toMatchObject({ status: 'READY', purgeAfter: null });
    // A record not scheduled never matches a schedule condition.
    await store.backups.updateBackup(record.id, { statuses: ['READY'] }, { status: 'DELETING' });
    expect(await store.backups.updateBackup(record.id, { statuses: ['DELETING'], scheduled: {} }, { status: 'READY' })).toBeUndefined();
    // Still referenced while DELETING: never an orphan.
    expect(await store.backups.liveBlobKeys(['backups/g/1.bin'])).toEqual(new Set(['backups/g/1.bin']));
  });

  const keep = (at: number, overrides: Partial<VaultKeep> = {}): VaultKeep => ({
    id: uuidv7(),
    replacedAt: at,
    replacedBy: 'key-1',
    reason: 'rotate',
    expiresAt: at + 7 * 24 * HOUR,
    limit: 10,
    ...overrides,
  });

  it('vault history: rotate and reset keep the replaced envelope; listed newest first until it expires; bounded', async () => {
    const account = await newAccount('free', false);
    expect(await store.vaults.replaceVault(account.id, vault('B'), { keep: keep(T0) })).toBe(false);
    expect(await store.vaults.listVaultHistory(account.id, T0)).toEqual([]);
    await store.vaults.createVault(account.id, vault('A'));
    const first = keep(T0 + 1, { replacedBy: 'session:s1' });
    expect(await store.vaults.replaceVault(account.id, { ...vault('B'), updatedAt: T0 + 1 }, { keep: first })).toBe(true);
    expect((await store.vaults.getVault(account.id))?.wrappedMasterKey).toBe(vault('B').wrappedMasterKey);
    // A conditional rotate whose compare-and-swap fails keeps nothing and changes nothing.
    expect(await store.vaults.replaceVault(account.id, vault('C'), { keep: keep(T0 + 1), expected: vault('A') })).toBe(false);
    expect((await store.vaults.getVault(account.id))?.wrappedMasterKey).toBe(vault('B').wrappedMasterKey);
    expect((await store.vaults.listVaultHistory(account.id, T0 + 1)).map((e) => e.id)).toEqual([first.id]);
    const second = keep(T0 + 2, { reason: 'reset', expiresAt: T0 + 3 * HOUR });
    expect(await store.vaults.deleteVault(account.id, second)).toBe(true);
    expect(await store.vaults.getVault(account.id)).toBeUndefined();
    expect(await store.vaults.deleteVault(account.id, keep(T0 + 3))).toBe(false);

    const history = await store.vaults.listVaultHistory(account.id, T0 + 2);
    expect(history.map((e) => [e.id, e.reason, e.replacedBy, e.vault.wrappedMasterKey])).toEqual([
      [second.id, 'reset', 'key-1', vault('B').wrappedMasterKey],
      [first.id, 'rotate', 'session:s1', vault('A').wrappedMasterKey],
    ]);
    expect(history[1]).toMatchObject({ accountId: account.id, replacedAt: T0 + 1, vault: { ...vault('A'), createdAt: T0 } });
    // Expired entries are not listed, and pruning removes them.
    expect((await store.vaults.listVaultHistory(account.id, T0 + 3 * HOUR)).map((e) => e.id)).toEqual([first.id]);
    expect(await store.vaults.pruneVaultHistory(T0 + 3 * HOUR)).toBeGreaterThanOrEqual(1);
    expect((await store.vaults.listVaultHistory(account.id, T0)).map((e) => e.id)).toEqual([first.id]);

    // At most `limit` entries: the oldest (limit - 1) and the newest stay, so a burst of rotations cannot push the
    // first envelope out.
    await store.vaults.createVault(account.id, vault('C'));
    for (let i = 0; i < 6; i++)
      await store.vaults.replaceVault(account.id, { ...vault('D'), updatedAt: T0 + 10 + i }, { keep: keep(T0 + 10 + i, { limit: 3 }) });
    const bounded = await store.vaults.listVaultHistory(account.id, T0);
    expect(bounded.map((e) => e.replacedAt)).toEqual([T0 + 15, T0 + 10, T0 + 1]);
    expect(bounded[2]!.vault.wrappedMasterKey).toBe(vault('A').wrappedMasterKey);
  });

  it('vault history: restore swaps atomically, keeps the replaced envelope, and one of two concurrent restores wins', async () => {
    const account = await newAccount('free', false);
    await store.vaults.createVault(account.id, vault('A'));
    const kept = keep(T0 + 1);
    await store.vaults.replaceVault(account.id, { ...vault('B'), updatedAt: T0 + 1 }, { keep: kept });
    expect(await store.vaults.restoreVault(account.id, kept.id, T0 + 8 * 24 * HOUR, keep(T0 + 2))).toBeUndefined(); // expired
    const other = await newAccount('free', false);
    expect(await store.vaults.restoreVault(other.id, kept.id, T0 + 2, keep(T0 + 2))).toBeUndefined(); // another account's

    const nodes = [store, await engine.peer()];
    const results = await Promise.all(
      nodes.map((node) => node.vaults.restoreVault(account.id, kept.id, T0 + 2, keep(T0 + 2, { reason: 'restore' }))),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    const current = await store.vaults.getVault(account.id);
    expect(current).toEqual({ ...vault('A'), updatedAt: T0 + 2, createdAt: T0 });
    const history = await store.vaults.listVaultHistory(account.id, T0 + 2);
    expect(history.map((e) => [e.reason, e.vault.wrappedMasterKey])).toEqual([['restore', vault('B').wrappedMasterKey]]);

    // Restoring after a reset (no vault now) brings the envelope back as the vault.
    const reset = keep(T0 + 3, { reason: 'reset' });
    await store.vaults.deleteVault(account.id, reset);
    expect(await store.vaults.restoreVault(account.id, reset.id, T0 + 4, keep(T0 + 4, { reason: 'restore' }))).toMatchObject({
      updatedAt: T0 + 4,
    });
    expect((await store.vaults.getVault(account.id))?.wrappedMasterKey).toBe(vault('A').wrappedMasterKey);
  });

  it('liveBlobKeys: keys referenced by a record that is not DELETED, or DELETED with its object locked', async () => {
    const account = await newAccount();
    const live = await insert(backup(account.id, { status: 'READY', blobKey: 'backups/a/live.bin' }));
    await insert(backup(account.id, { status: 'DELETING', blobKey: 'backups/a/deleting.bin' }));
    await insert(backup(account.id, { status: 'DELETED', blobKey: 'backups/a/gone.bin' }));
    // Object Lock: a DELETED record's object still locked is the sweeper's to release, never an orphan.
    const locked = { status: 'DELETED' as const, blobKey: 'backups/a/locked.bin', lockedUntil: T0, blobVersion: 'v1' };
    const kept = await insert(backup(account.id, locked));
    expect(await store.backups.getBackup(kept.id)).toMatchObject({ lockedUntil: T0, blobVersion: 'v1' });
    const keys = ['backups/a/live.bin', 'backups/a/deleting.bin', 'backups/a/gone.bin', 'backups/a/locked.bin', 'backups/a/never.bin'];
    expect([...(await store.backups.liveBlobKeys(keys))].sort()).toEqual([
      'backups/a/deleting.bin',
      'backups/a/live.bin',
      'backups/a/locked.bin',
    ]);
    expect(await store.backups.liveBlobKeys([])).toEqual(new Set());
    const many = Array.from({ length: 1200 }, (_, i) => `backups/none/${i}.bin`).concat(live.blobKey!);
    expect(await store.backups.liveBlobKeys(many)).toEqual(new Set([live.blobKey]));
  });

  it('ensureSetting: the first writer wins, on every node', async () => {
    const nodes = [store, await engine.peer(), await engine.peer()];
    const values = await Promise.all(nodes.map((node, i) => node.settings.ensureSetting('contract.secret', `value-${i}`, T0)));
    expect(new Set(values).size).toBe(1);
    expect(await store.settings.ensureSetting('contract.secret', 'other', T0)).toBe(values[0]);
  });

  it('putSetting: the last writer wins, and every node reads it (getSetting)', async () => {
    const peer = await engine.peer();
    expect(await peer.settings.getSetting('contract.public-url')).toBeUndefined();
    await store.settings.putSetting('contract.public-url', 'http://first.example', T0);
    await peer.settings.putSetting('contract.public-url', 'http://second.example', T0 + 1);
    expect(await store.settings.getSetting('contract.public-url')).toBe('http://second.example');
    expect(await peer.settings.getSetting('contract.public-url')).toBe('http://second.example');
  });

  it('API keys: read one by id', async () => {
    const account = await newAccount();
    const key = {
      id: uuidv7(),
      accountId: account.id,
      scopes: ['backups:read'] as 'backups:read'[],
      createdAt: T0,
      expiresAt: null,
      revokedAt: null,
      appendOnly: false,
    };
    await store.keys.createApiKey(key, `hash-${key.id}`);
    expect(await store.keys.getApiKey(key.id)).toEqual(key);
    expect(await store.keys.getApiKey(uuidv7())).toBeUndefined();
  });

  it('API keys: the append-only restriction is stored and read back by every lookup', async () => {
    const account = await newAccount();
    const base = {
      accountId: account.id,
      scopes: ['backups:read', 'backups:write'] as Scope[],
      createdAt: T0,
      expiresAt: null,
      revokedAt: null,
    };
    const restricted = { ...base, id: uuidv7(), appendOnly: true };
    const plain = { ...base, id: uuidv7(), appendOnly: false };
    await store.keys.createApiKey(restricted, `hash-${restricted.id}`);
    await store.keys.createApiKey(plain, `hash-${plain.id}`);
    expect(await store.keys.getApiKey(restricted.id)).toEqual(restricted);
    expect(await store.keys.findApiKeyByHash(`hash-${restricted.id}`)).toEqual(restricted);
    expect(await store.keys.findApiKeyByHash(`hash-${plain.id}`)).toEqual(plain);
    expect((await store.keys.listApiKeys(account.id)).map((k) => [k.id, k.appendOnly])).toEqual([
      [restricted.id, true],
      [plain.id, false],
    ]);
  });

  it("API keys: a key's label is stored and read back by every lookup (migration 0009); a key without one has none", async () => {
    const account = await newAccount();
    const base = {
      accountId: account.id,
      scopes: ['backups:write'] as Scope[],
      createdAt: T0,
      expiresAt: null,
      revokedAt: null,
      appendOnly: false,
    };
    const labelled = { ...base, id: uuidv7(), label: "Anna's laptop (work)" };
    const bare = { ...base, id: uuidv7() };
    await store.keys.createApiKey(labelled, `hash-${labelled.id}`);
    await store.keys.createApiKey(bare, `hash-${bare.id}`);
    expect(await store.keys.getApiKey(labelled.id)).toEqual(labelled);
    expect(await store.keys.findApiKeyByHash(`hash-${labelled.id}`)).toEqual(labelled);
    expect(await store.keys.getApiKey(bare.id)).toEqual(bare);
    expect((await store.keys.listApiKeys(account.id)).map((k) => k.label ?? null)).toEqual([labelled.label, null]);
  });

  it('audit trail: stored per account, newest first, bounded to the newest `keep` per outcome, from any node', async () => {
    const [mine, theirs] = [await newAccount(), await newAccount()];
    const entry = (accountId: string, at: number, overrides: Partial<AuditEntry> = {}): AuditEntry => ({
      id: uuidv7(),
      accountId,
      at,
      action: 'backup.delete',
      outcome: 'done',
      actor: { kind: 'key', id: uuidv7() },
      address: '203.0.113.7',
      target: uuidv7(),
      detail: null,
      ...overrides,
    });
    const peer = await engine.peer();
    const written: AuditEntry[] = [];
    for (let i = 0; i < 5; i++) {
      const e = entry(
        mine.id,
        T0 + i * 1000,
        i === 2
          ? {
              outcome: 'refused',
              actor: { kind: 'operator', id: null },
              address: null,
              target: null,
              detail: 'free → plus',
              action: 'account.plan',
            }
          : {},
      );
      written.push(e);
      await (i % 2 === 0 ? store : peer).audit.appendAudit(e, 3);
    }
    const other = entry(theirs.id, T0 + 500);
    await store.audit.appendAudit(other, 3);
    // Only the newest three done entries of mine are kept (and the one refused); the other account's is untouched.
    expect(await store.audit.listAudit(mine.id, 10)).toEqual(written.slice(1).reverse());
    expect(await store.audit.listAudit(mine.id, 2)).toEqual(written.slice(3).reverse());
    expect(await store.audit.listAudit(theirs.id, 10)).toEqual([other]);
    expect(await store.audit.listAudit(uuidv7(), 10)).toEqual([]);
    // Refused attempts are bounded on their own: a flood of them never pushes out what was done.
    const done = await store.audit.listAudit(mine.id, 10);
    const flood: AuditEntry[] = [];
    for (let i = 0; i < 5; i++) {
      const e = entry(mine.id, T0 + 10_000 + i, { outcome: 'refused' });
      flood.push(e);
      await store.audit.appendAudit(e, 3);
    }
    const after = await store.audit.listAudit(mine.id, 10);
    expect(after.filter((e) => e.outcome === 'refused')).toEqual(flood.slice(2).reverse());
    expect(after.filter((e) => e.outcome === 'done')).toEqual(done.filter((e) => e.outcome === 'done'));
    // Same instant: the later id (uuidv7) is newer.
    const tie = entry(theirs.id, T0 + 500);
    await peer.audit.appendAudit(tie, 3);
    expect((await store.audit.listAudit(theirs.id, 10)).map((e) => e.id)).toEqual([tie.id, other.id]);
  });

  it('login links: used once, never after expiry, one winner among concurrent uses across nodes', async () => {
    const account = await newAccount();
    const link = { id: uuidv7(), accountId: account.id, createdAt: T0, expiresAt: T0 + 600_000, usedAt: null };
    await store.sessions.createLoginLink(link, `link-${link.id}`);
    await expect(store.sessions.createLoginLink({ ...link, id: uuidv7() }, `link-${link.id}`)).rejects.toThrow();
    expect(await store.sessions.consumeLoginLink('unknown', T0)).toBeUndefined();
    expect(await store.sessions.consumeLoginLink(`link-${link.id}`, T0 + 600_000)).toBeUndefined(); // expired at expiresAt
    expect(await store.sessions.consumeLoginLink(`link-${link.id}`, T0 + 1)).toEqual({ ...link, usedAt: T0 + 1 });
    expect(await store.sessions.consumeLoginLink(`link-${link.id}`, T0 + 2)).toBeUndefined(); // used

    const raced = { ...link, id: uuidv7() };
    await store.sessions.createLoginLink(raced, `link-${raced.id}`);
    const nodes = [store, await engine.peer(), await engine.peer()];
    const results = await Promise.all(nodes.map((node) => node.sessions.consumeLoginLink(`link-${raced.id}`, T0 + 3)));
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  it('sessions: stored by hash, revoked once, pruned after expiry (with expired links)', async () => {
    const account = await newAccount();
    const key = {
      id: uuidv7(),
      accountId: account.id,
      scopes: ['backups:read'] as 'backups:read'[],
      createdAt: T0,
      expiresAt: null,
      revokedAt: null,
      appendOnly: false,
    };
    await store.keys.createApiKey(key, `hash-${key.id}`);
    const byLink = { id: uuidv7(), accountId: account.id, keyId: null, createdAt: T0, expiresAt: T0 + HOUR, revokedAt: null, freshAt: T0 };
    // A session opened with a key made in an earlier session keeps that session's sign-in time (migration 0008).
    const byKey = { ...byLink, id: uuidv7(), keyId: key.id, expiresAt: T0 + 2 * HOUR, freshAt: T0 - 60_000 };
    await store.sessions.createSession(byLink, `session-${byLink.id}`);
    await store.sessions.createSession(byKey, `session-${byKey.id}`);
    await expect(store.sessions.createSession({ ...byLink, id: uuidv7() }, `session-${byLink.id}`)).rejects.toThrow();
    expect(await store.sessions.findSessionByHash(`session-${byLink.id}`)).toEqual(byLink);
    expect(await store.sessions.findSessionByHash(`session-${byKey.id}`)).toEqual(byKey);
    expect(await store.sessions.findSessionByHash('unknown')).toBeUndefined();
    expect(await store.sessions.revokeSession(byLink.id, T0 + 5)).toBe(true);
    expect(await store.sessions.revokeSession(byLink.id, T0 + 6)).toBe(false);
    expect(await store.sessions.revokeSession(uuidv7(), T0 + 6)).toBe(false);
    expect((await store.sessions.findSessionByHash(`session-${byLink.id}`))?.revokedAt).toBe(T0 + 5);

    const link = { id: uuidv7(), accountId: account.id, createdAt: T0, expiresAt: T0 + 60_000, usedAt: null };
    await store.sessions.createLoginLink(link, `link-${link.id}`);
    // Other accounts' rows from earlier cases may go too; count only this account's.
    await store.sessions.pruneSessions(T0 + HOUR + 1);
    expect(await store.sessions.findSessionByHash(`session-${byLink.id}`)).toBeUndefined();
    expect(await store.sessions.findSessionByHash(`session-${byKey.id}`)).toEqual(byKey);
    expect(await store.sessions.consumeLoginLink(`link-${link.id}`, T0)).toBeUndefined();
    expect(await store.sessions.pruneSessions(T0 + 2 * HOUR + 1)).toBeGreaterThanOrEqual(1);
    expect(await store.sessions.findSessionByHash(`session-${byKey.id}`)).toBeUndefined();
  });

  it('usage: stored bytes, counts by state and the backups created since, per account (one source for every report)', async () => {
    const account = await newAccount('plus');
    const at = (offset: number) => T0 + offset * HOUR;
    await insert(backup(account.id, { status: 'READY', createdAt: at(0), ciphertextSizeBytes: 100 }));
    await insert(backup(account.id, { status: 'READY', createdAt: at(5), ciphertextSizeBytes: 200 }));
    await insert(backup(account.id, { status: 'DELETING', createdAt: at(6), purgeAfter: at(100), ciphertextSizeBytes: 40 })); // in grace
    await insert(backup(account.id, { status: 'DELETING', createdAt: at(7), purgeAfter: null, ciphertextSizeBytes: 8 })); // going now
    await insert(backup(account.id, { status: 'UPLOADED', createdAt: at(8), ciphertextSizeBytes: 2 }));
    await insert(backup(account.id, { status: 'PENDING_UPLOAD', createdAt: at(9) }));
    const [row] = await store.usage.usage(at(10), account.id, at(5));
    expect(row).toEqual({
      accountId: account.id,
      ownerAccountId: null,
      hostLabel: null,
      plan: 'plus',
      createdAt: T0,
      storedBytes: 342,
      backups: 2,
      graceBackups: 1,
      uploadingBackups: 2,
      createdSince: 3, // READY and DELETING ones created at or after the fifth hour
      lastReadyAt: null,
    });
    expect((await store.usage.usage(at(10), account.id))[0]!.createdSince).toBe(0);
    expect((await store.usage.usage(at(10))).map((r) => r.accountId)).toContain(account.id);
  });

  it("a fleet: host accounts take their owner's plan (also when it changes) and store under the owner's quota, one lock", async () => {
    const owner = await newAccount('pro');
    const other = await newAccount('pro');
    const host = (label: string): Account => ({
      id: uuidv7(),
      plan: 'free', // not the owner's: the store takes the owner's
      createdAt: T0,
      lastReadyCreatedAt: null,
      deletionGraceDays: 0,
      ownerAccountId: owner.id,
      label,
    });
    const made = host('web');
    await store.accounts.createAccount(made);
    expect((await store.accounts.getAccount(made.id))?.plan).toBe('pro');
    const web = (await store.accounts.getAccount(made.id))!;
    expect(await store.accounts.setPlan(owner.id, 'plus')).toBe(true);
    const db = await store.accounts.createAccount(host('db'));
    expect(db.plan).toBe('plus'); // the stored account is returned
    expect((await store.accounts.listHostAccounts(owner.id)).map((a) => [a.id, a.plan])).toEqual([
      [web.id, 'plus'],
      [db.id, 'plus'],
    ]);
    expect((await store.accounts.getAccount(other.id))?.plan).toBe('pro');

    await insert(backup(owner.id, { status: 'READY', ciphertextSizeBytes: 100 }));
    await insert(backup(web.id, { status: 'READY', ciphertextSizeBytes: 20 }));
    await insert(backup(other.id, { status: 'READY', ciphertextSizeBytes: 5000 }));
    const fleet = await store.usage.fleetUsage(T0, db.id);
    expect(fleet).toMatchObject({ owner: { id: owner.id }, storedBytes: 120, accounts: 3 });
    expect(await store.usage.fleetUsage(T0, owner.id)).toMatchObject({ owner: { id: owner.id }, storedBytes: 120 });
    expect(await store.usage.fleetUsage(T0, other.id)).toMatchObject({ owner: { id: other.id }, storedBytes: 5000, accounts: 1 });
    expect(await store.usage.fleetUsage(T0, uuidv7())).toBeUndefined();

    // A host account's reservation is judged by the owner's row (its quota) against what the whole fleet stores.
    await store.accounts.setQuota(web.id, null); // a host account's own quota is never read
    await store.accounts.setQuota(owner.id, 150);
    const slot = await insert(backup(db.id));
    const reserve = (id: string, bytes: number) =>
      store.usage.reserveUpload(
        { id: uuidv7(), accountId: id, backupId: slot.id, expiresAt: T0 + HOUR },
        T0,
        (quota, usage) => (quota === null || usage + bytes <= quota ? bytes : null),
        (account) => (account.id === owner.id ? (account.quotaOverride ?? null) : -1),
      );
    expect(await reserve(db.id, 20)).toEqual({ reserved: 20 });
    expect(await reserve(web.id, 20)).toEqual({ reserved: null, quota: 150, usage: 140 });
    expect(await reserve(owner.id, 10)).toEqual({ reserved: 10 });
    expect((await store.usage.fleetUsage(T0, web.id))?.storedBytes).toBe(150);
    const rows = await store.usage.usage(T0);
    expect(rows.find((r) => r.accountId === db.id)).toMatchObject({ ownerAccountId: owner.id, hostLabel: 'db', storedBytes: 20 });
    expect(rows.find((r) => r.accountId === owner.id)).toMatchObject({ ownerAccountId: null, hostLabel: null });
  });

  it('operator links and sessions follow the same rules in their own tables (single use across nodes, revoked once)', async () => {
    const link = { id: uuidv7(), operator: 'ops', createdAt: T0, expiresAt: T0 + 600_000, usedAt: null };
    await store.operatorSessions.createOperatorLink(link, `oplink-${link.id}`);
    // An owner's link table never holds it, nor the reverse.
    expect(await store.sessions.consumeLoginLink(`oplink-${link.id}`, T0 + 1)).toBeUndefined();
    expect(await store.operatorSessions.consumeOperatorLink(`oplink-${link.id}`, T0 + 600_000)).toBeUndefined(); // expired at expiresAt
    expect(await store.operatorSessions.consumeOperatorLink(`oplink-${link.id}`, T0 + 1)).toEqual({ ...link, usedAt: T0 + 1 });
    expect(await store.operatorSessions.consumeOperatorLink(`oplink-${link.id}`, T0 + 2)).toBeUndefined(); // used
    const raced = { ...link, id: uuidv7() };
    await store.operatorSessions.createOperatorLink(raced, `oplink-${raced.id}`);
    const nodes = [store, await engine.peer(), await engine.peer()];
    const results = await Promise.all(nodes.map((node) => node.operatorSessions.consumeOperatorLink(`oplink-${raced.id}`, T0 + 3)));
    expect(results.filter(Boolean)).toHaveLength(1);

    const session = { id: uuidv7(), operator: 'ops', createdAt: T0, expiresAt: T0 + HOUR, revokedAt: null };
    await store.operatorSessions.createOperatorSession(session, `opsession-${session.id}`);
    expect(await store.operatorSessions.findOperatorSessionByHash(`opsession-${session.id}`)).toEqual(session);
    expect(await store.sessions.findSessionByHash(`opsession-${session.id}`)).toBeUndefined();
    expect(await store.sessions.revokeSession(session.id, T0 + 4)).toBe(false); // not an owner's session
    expect(await store.operatorSessions.revokeOperatorSession(session.id, T0 + 5)).toBe(true);
    expect(await store.operatorSessions.revokeOperatorSession(session.id, T0 + 6)).toBe(false);
    expect((await store.operatorSessions.findOperatorSessionByHash(`opsession-${session.id}`))?.revokedAt).toBe(T0 + 5);
  });

  it('pruneSessions also removes ended rows: used links, signed-out sessions, sessions of dead keys', async () => {
    const account = await newAccount();
    const key = (overrides: { expiresAt?: number | null; revokedAt?: number | null } = {}) => ({
      id: uuidv7(),
      accountId: account.id,
      scopes: ['backups:read'] as 'backups:read'[],
      createdAt: T0,
      expiresAt: null,
      revokedAt: null,
      appendOnly: false,
      ...overrides,
    });
    const [liveKey, revokedKey, expiredKey] = [key(), key({ revokedAt: T0 + 1 }), key({ expiresAt: T0 + 1 })];
    for (const k of [liveKey, revokedKey, expiredKey]) await store.keys.createApiKey(k, `hash-${k.id}`);
    const session = (keyId: string | null, revokedAt: number | null = null) => ({
      id: uuidv7(),
      accountId: account.id,
      keyId,
      createdAt: T0,
      expiresAt: T0 + 10 * HOUR,
      revokedAt,
      freshAt: T0,
    });
    const kept = [session(null), session(liveKey.id)];
    const gone = [session(null, T0 + 1), session(revokedKey.id), session(expiredKey.id)];
    for (const s of [...kept, ...gone]) await store.sessions.createSession(s, `session-${s.id}`);
    const link = (usedAt: number | null) => ({ id: uuidv7(), accountId: account.id, createdAt: T0, expiresAt: T0 + HOUR, usedAt });
    const [used, unused] = [link(null), link(null)];
    for (const l of [used, unused]) await store.sessions.createLoginLink(l, `link-${l.id}`);
    expect(await store.sessions.consumeLoginLink(`link-${used.id}`, T0 + 1)).toBeDefined();

    // Rows that ended at `before` exactly stay for the next prune.
    await store.sessions.pruneSessions(T0 + 1);
    for (const s of [...kept, ...gone]) expect(await store.sessions.findSessionByHash(`session-${s.id}`)).toEqual(s);
    // Other accounts' rows from earlier cases may go too; only this account's are checked.
    expect(await store.sessions.pruneSessions(T0 + 2)).toBeGreaterThanOrEqual(gone.length + 1);
    for (const s of kept) expect(await store.sessions.findSessionByHash(`session-${s.id}`)).toEqual(s);
    for (const s of gone) expect(await store.sessions.findSessionByHash(`session-${s.id}`)).toBeUndefined();
    // The used link is gone (a re-inserted twin with its hash no longer collides); the unused one still works.
    await store.sessions.createLoginLink({ ...used, id: uuidv7(), usedAt: null }, `link-${used.id}`);
    expect(await store.sessions.consumeLoginLink(`link-${unused.id}`, T0 + 3)).toBeDefined();
  });

  it('tryExclusive: one holder at a time across nodes, released after the task (and after a throw)', async () => {
    const nodes = [store, await engine.peer(), await engine.peer()];
    // The first holder's task is held in flight until released: no timing decides who overlaps whom.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const holding = new Promise<void>((resolve) => (started = resolve));
    let ran = 0;
    const first = nodes[0]!.database.tryExclusive('sweeper', async () => {
      ran += 1;
      started();
      await gate;
      return 'done';
    });
    await holding;
    // While it holds the name, every node (its own included) is refused, and their tasks do not run.
    const others = await Promise.all(
      nodes.map((node) =>
        node.database.tryExclusive('sweeper', async () => {
          ran += 1;
          return 'also';
        }),
      ),
    );
    expect(others).toEqual([{ ran: false }, { ran: false }, { ran: false }]);
    // Another name is not excluded by it.
    expect(await nodes[1]!.database.tryExclusive('other', async () => 7)).toEqual({ ran: true, value: 7 });
    release();
    expect(await first).toEqual({ ran: true, value: 'done' });
    expect(ran).toBe(1);

    // Released after the task: another node gets it; after a throw, too.
    expect(await nodes[1]!.database.tryExclusive('sweeper', async () => 42)).toEqual({ ran: true, value: 42 });
    await expect(nodes[2]!.database.tryExclusive('sweeper', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await nodes[0]!.database.tryExclusive('sweeper', async () => 43)).toEqual({ ran: true, value: 43 });
    // Names nest.
    expect(await store.database.tryExclusive('a', async () => store.database.tryExclusive('b', async () => 1))).toEqual({
      ran: true,
      value: { ran: true, value: 1 },
    });
  });
});
