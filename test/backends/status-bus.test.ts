/**
 * ONE contract suite for the StatusBus (in-process and PostgreSQL LISTEN/NOTIFY), plus what only the shared
 * bus must do: a change published on node A reaches subscribers on node B, read once per change on B however
 * many streams follow it, and a broken LISTEN connection is reported and then repaired.
 */
import { beforeAll, expect, it, vi } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import pg from 'pg';
import { PgStatusBus } from '../../src/events/pg-bus.js';
import { LocalStatusBus, type StatusBus } from '../../src/events/status-bus.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import type { Backup } from '../../src/domain/entities.js';
import type { Stores } from '../../src/store/ports/stores.js';
import { PG_URL, createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { newSlot } from '../../src/services/backups.js';
import { describeEngines, type Engine } from './engine.js';

const T0 = Date.parse('2026-11-21T10:00:00.000Z');

function record(accountId: string, overrides: Partial<Backup> = {}): Backup {
  const id = uuidv7();
  return { ...newSlot(id, accountId, T0, T0 + 3_600_000), ...overrides };
}

/** Resolves with the first `count` deliveries to a subscriber of `id`, or rejects after `ms`. */
function collect(bus: StatusBus, id: string, count = 1, ms = 3000): Promise<Backup[]> {
  return new Promise((resolve, reject) => {
    const seen: Backup[] = [];
    const timer = setTimeout(() => {
      off();
      reject(new Error(`only ${seen.length} of ${count} deliveries within ${ms} ms`));
    }, ms);
    const off = bus.subscribe(id, (backup) => {
      seen.push(backup);
      if (seen.length === count) {
        clearTimeout(timer);
        off();
        resolve(seen);
      }
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** setUp returns the account the suite's records belong to. */
interface BusEngine extends Engine<string> {
  /**
   * A bus as one node holds it; the same node each call for the in-process bus. A shared bus reads the records it
   * fans out with `load(id, read)` when given (`read` reads the store), else straight from the store.
   */
  node(
    load?: (backupId: string, read: (backupId: string) => Promise<Backup | undefined>) => Promise<Backup | undefined>,
  ): Promise<StatusBus>;
  /** Stores a record so a shared bus can read it. */
  save(backup: Backup): Promise<void>;
}

function localEngine(): BusEngine {
  const bus = new LocalStatusBus();
  return {
    name: 'local',
    async setUp() {
      return uuidv7();
    },
    async node() {
      return bus;
    },
    async save() {},
    async tearDown() {
      await bus.close();
    },
  };
}

function pgEngine(): BusEngine {
  let pgState: { schema: TestSchema; store: Stores; buses: PgStatusBus[] } | undefined;
  return {
    name: 'postgres',
    skip: skipPg,
    async setUp() {
      requirePg();
      const schema = await createTestSchema('coffer_bus');
      const store = openPostgresStores(schema.url);
      pgState = { schema, store, buses: [] };
      await store.database.migrate();
      const accountId = uuidv7();
      await store.accounts.createAccount({ id: accountId, plan: 'free', createdAt: T0, lastReadyCreatedAt: null });
      return accountId;
    },
    async node(load) {
      const read = (id: string) => pgState!.store.backups.getBackup(id);
      const bus = new PgStatusBus({ connectionString: pgState!.schema.url, load: load ? (id) => load(id, read) : read });
      await bus.start();
      pgState!.buses.push(bus);
      return bus;
    },
    async save(backup) {
      const existing = await pgState!.store.backups.getBackup(backup.id);
      if (!existing) {
        await pgState!.store.backups.createBackup(backup.accountId, backup.createdAt, () => ({ allowed: true }), backup);
      } else {
        const { id: _id, accountId: _a, createdAt: _c, blobPath: _b, ...patch } = backup;
        await pgState!.store.backups.updateBackup(backup.id, { statuses: [existing.status] }, patch);
      }
    },
    async tearDown() {
      if (!pgState) return;
      await Promise.all(pgState.buses.map((bus) => bus.close()));
      await pgState.store.database.close();
      await pgState.schema.drop();
    },
  };
}

describeEngines('StatusBus backend', [localEngine(), pgEngine()], (engine, backend) => {
  let accountId: string;
  beforeAll(() => {
    accountId = backend();
  });

  it('delivers a published change to the subscribers of that backup only, on the same node', async () => {
    const bus = await engine.node();
    const mine = record(accountId);
    const other = record(accountId);
    await engine.save(mine);
    const got = collect(bus, mine.id, 1);
    let wrong = 0;
    const offOther = bus.subscribe(other.id, () => (wrong += 1));
    await bus.publish(mine);
    expect((await got)[0]).toEqual(mine);
    await sleep(100);
    expect(wrong).toBe(0);
    offOther();
  });

  it('unsubscribe stops delivery (and twice is harmless)', async () => {
    const bus = await engine.node();
    const backup = record(accountId);
    await engine.save(backup);
    let count = 0;
    const off = bus.subscribe(backup.id, () => (count += 1));
    await bus.publish(backup);
    off();
    off();
    await bus.publish({ ...backup, updatedAt: backup.updatedAt + 1 });
    await sleep(100);
    expect(count).toBe(1);
  });
});

// Across nodes: only PostgreSQL's bus has more than one node (LISTEN/NOTIFY).
describeEngines('StatusBus across nodes', [pgEngine()], (engine, backend) => {
  let accountId: string;
  beforeAll(() => {
    accountId = backend();
  });

  it('a change published on node A reaches node B, read once per change however many streams follow it', async () => {
    const [a, b] = [await engine.node(), await engine.node()];
    const backup = record(accountId);
    await engine.save(backup);
    const streams = Array.from({ length: 50 }, () => collect(b, backup.id, 1));
    const readsBefore = (b as PgStatusBus).stats.reads;
    const uploaded = { ...backup, status: 'UPLOADED' as const, updatedAt: T0 + 1 };
    await engine.save(uploaded);
    await a.publish(uploaded);
    const delivered = await Promise.all(streams);
    for (const [got] of delivered) expect(got).toEqual(uploaded);
    expect((b as PgStatusBus).stats.reads - readsBefore).toBe(1);

    // Nobody on A follows another backup: A hears the notice but reads nothing.
    const unwatched = record(accountId);
    await engine.save(unwatched);
    const readsOnA = (a as PgStatusBus).stats.reads;
    const heardOnA = (a as PgStatusBus).stats.notifications;
    await b.publish(unwatched);
    await sleep(200);
    expect((a as PgStatusBus).stats.notifications).toBeGreaterThan(heardOnA);
    expect((a as PgStatusBus).stats.reads).toBe(readsOnA);
  });

  it('a burst of changes on A while B reads coalesces into one more read, and B ends on the latest state', async () => {
    // B's first read takes its snapshot of the record, then is held in flight until released, while A publishes
    // 20 more changes: coalescing promises exactly one more read once it ends (which brings the latest state),
    // not one per change, and not none (B would end on the held, stale snapshot).
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let firstCall!: () => void;
    const called = new Promise<void>((resolve) => (firstCall = resolve));
    let calls = 0;
    const a = await engine.node();
    const b = (await engine.node(async (id, read) => {
      calls += 1;
      const snapshot = await read(id);
      if (calls === 1) {
        firstCall();
        await held;
      }
      return snapshot;
    })) as PgStatusBus;
    const backup = record(accountId);
    await engine.save(backup);
    const seen: Backup[] = [];
    const off = b.subscribe(backup.id, (x) => seen.push(x));
    const heardBefore = b.stats.notifications;
    const change = (i: number) => ({ ...backup, updatedAt: T0 + i, ciphertextSizeBytes: i });

    await engine.save(change(1));
    await a.publish(change(1));
    await called;
    for (let i = 2; i <= 21; i++) {
      await engine.save(change(i));
      await a.publish(change(i));
    }
    // B has heard all 21 notifications while its first read is still held.
    while (b.stats.notifications - heardBefore < 21) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(calls).toBe(1);
    expect(seen).toEqual([]);

    release();
    // Bounded against a hang (the held snapshot is stale: without the one more read B never gets here).
    await vi.waitFor(() => expect(seen.at(-1)).toEqual(change(21)), { timeout: 5000, interval: 10 });
    off();
    expect(calls).toBe(2);
    expect(b.stats.reads).toBe(2);
    expect(seen[0]).toEqual(change(1));
    expect(seen[1]).toEqual(change(21));
  });

  it('a lost LISTEN connection is reported to the streams, then repaired', async () => {
    const [a, b] = [await engine.node(), await engine.node()];
    const failures: Error[] = [];
    b.onFailure((error) => failures.push(error));
    const pid = (b as PgStatusBus).listenerProcessId;
    expect(pid).toBeTypeOf('number');
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query('select pg_terminate_backend($1)', [pid]);
    await admin.end();
    for (let i = 0; i < 50 && (b as PgStatusBus).stats.reconnects === 0; i++) await sleep(100);
    expect(failures).toHaveLength(1);
    expect((b as PgStatusBus).stats.reconnects).toBe(1);
    const backup = record(accountId);
    await engine.save(backup);
    const got = collect(b, backup.id, 1);
    await a.publish(backup);
    expect((await got)[0]).toEqual(backup);
  });
});
