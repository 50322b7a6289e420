/**
 * ONE contract suite for the StatusBus (in-process and PostgreSQL LISTEN/NOTIFY), plus what only the shared
 * bus must do: a change published on node A reaches subscribers on node B, read once per change on B however
 * many streams follow it, and a broken LISTEN connection is reported and then repaired.
 */
import { beforeAll, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import pg from 'pg';
import { PgStatusBus } from '../../src/events/pg-bus.js';
import { LocalStatusBus, type StatusBus } from '../../src/events/status-bus.js';
import { openPostgresStore } from '../../src/store/postgres.js';
import type { Backup, Store } from '../../src/store/store.js';
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
  /** A bus as one node holds it; the same node each call for the in-process bus. */
  node(): Promise<StatusBus>;
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
  let pgState: { schema: TestSchema; store: Store; buses: PgStatusBus[] } | undefined;
  return {
    name: 'postgres',
    skip: skipPg,
    async setUp() {
      requirePg();
      const schema = await createTestSchema('coffer_bus');
      const store = openPostgresStore(schema.url);
      pgState = { schema, store, buses: [] };
      await store.migrate();
      const accountId = uuidv7();
      await store.createAccount({ id: accountId, plan: 'free', createdAt: T0, lastReadyCreatedAt: null });
      return accountId;
    },
    async node() {
      const bus = new PgStatusBus({ connectionString: pgState!.schema.url, load: (id) => pgState!.store.getBackup(id) });
      await bus.start();
      pgState!.buses.push(bus);
      return bus;
    },
    async save(backup) {
      const existing = await pgState!.store.getBackup(backup.id);
      if (!existing) {
        await pgState!.store.createBackup(backup.accountId, backup.createdAt, () => ({ allowed: true }), backup);
      } else {
        const { id: _id, accountId: _a, createdAt: _c, blobPath: _b, ...patch } = backup;
        await pgState!.store.updateBackup(backup.id, { statuses: [existing.status] }, patch);
      }
    },
    async tearDown() {
      if (!pgState) return;
      await Promise.all(pgState.buses.map((bus) => bus.close()));
      await pgState.store.close();
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

  it.skipIf(engine.name !== 'postgres')(
    'a change published on node A reaches node B, read once per change however many streams follow it',
    async () => {
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
    },
  );

  it.skipIf(engine.name !== 'postgres')(
    'a burst of changes on A coalesces into few reads on B, and B ends on the latest state',
    async () => {
      const [a, b] = [await engine.node(), await engine.node()];
      const backup = record(accountId);
      await engine.save(backup);
      const seen: Backup[] = [];
      const off = b.subscribe(backup.id, (x) => seen.push(x));
      const readsBefore = (b as PgStatusBus).stats.reads;
      let latest = backup;
      for (let i = 1; i <= 20; i++) {
        latest = { ...backup, updatedAt: T0 + i, ciphertextSizeBytes: i };
        await engine.save(latest);
        void a.publish(latest);
      }
      await sleep(500);
      off();
      expect(seen.at(-1)).toEqual(latest);
      expect((b as PgStatusBus).stats.reads - readsBefore).toBeLessThanOrEqual(20);
    },
  );

  it.skipIf(engine.name !== 'postgres')(
    'a lost LISTEN connection is reported to the streams, then repaired',
    async () => {
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
    },
  );
});
