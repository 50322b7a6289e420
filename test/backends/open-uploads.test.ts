/**
 * The open-upload bookkeeping of the presigned upload's cycle (bench P8), on every SQL engine (SQLite and the real
 * PostgreSQL, its own schema per run): an upload recorded with its part 1 in one write, its bytes read in one query,
 * and the end of an upload — reservation ended, open upload forgotten — in the same commit as the record's update
 * (PostgreSQL: in the update's own statement), whether or not the update applies.
 */
import { beforeAll, expect, it } from 'vitest';
import { v7 as uuidv7 } from 'uuid';
import type { Account, Backup } from '../../src/domain/entities.js';
import { newSlot } from '../../src/services/backups.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import { openSqliteStores } from '../../src/store/sqlite.js';
import { SQLITE_DRIVERS, sqliteDrivers } from '../../src/store/sqlite-driver.js';
import type { Stores } from '../../src/store/ports/stores.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { lacking } from '../helpers/required.js';
import { tempDir } from '../helpers/tmp.js';
import { describeEngines, type Engine } from './engine.js';

const T0 = Date.parse('2026-11-28T10:00:00.000Z');
const HOUR = 3_600_000;

const drivers = await sqliteDrivers();
const driver = SQLITE_DRIVERS.find((name) => !drivers.unavailable.has(name)) ?? SQLITE_DRIVERS[0]!;

function sqliteEngine(): Engine<Stores> {
  let store: Stores | undefined;
  return {
    name: `sqlite (${driver})`,
    skip: lacking(!drivers.unavailable.has(driver), `sqlite:${driver}`),
    async setUp() {
      store = await openSqliteStores(tempDir('coffer-open-uploads-'), driver);
      await store.database.migrate();
      return store;
    },
    async tearDown() {
      await store?.database.close();
    },
  };
}

function postgresEngine(): Engine<Stores> {
  let schema: TestSchema | undefined;
  let store: Stores | undefined;
  return {
    name: 'postgres',
    skip: skipPg,
    async setUp() {
      requirePg();
      schema = await createTestSchema('coffer_open_uploads');
      store = openPostgresStores(schema.url);
      await store.database.migrate();
      return store;
    },
    async tearDown() {
      await store?.database.close();
      await schema?.drop();
    },
  };
}

describeEngines('Open uploads of the presigned cycle', [sqliteEngine(), postgresEngine()], (_engine, backend) => {
  let store: Stores;
  beforeAll(() => {
    store = backend();
  });

  async function slot(): Promise<Backup> {
    const account: Account = { id: uuidv7(), plan: 'free', createdAt: T0, lastReadyCreatedAt: null, deletionGraceDays: 0 };
    await store.accounts.createAccount(account);
    const record = newSlot(uuidv7(), account.id, T0, T0 + HOUR);
    const decision = await store.backups.createBackup(account.id, T0, () => ({ allowed: true }), record);
    expect(decision.allowed).toBe(true);
    return record;
  }

  async function reserve(record: Backup, id: string, bytes: number): Promise<void> {
    const reservation = { id, accountId: record.accountId, backupId: record.id, expiresAt: record.expiresAt };
    const reserved = await store.usage.reserveUpload(
      reservation,
      T0,
      () => bytes,
      () => 1_000_000,
    );
    expect(reserved).toEqual({ reserved: bytes });
  }

  const reservedBytes = async (record: Backup) => (await store.usage.fleetUsage(T0, record.accountId))?.storedBytes;

  it('an upload recorded with its part 1 holds that size at once; counted after the record; unknown uploads hold nothing', async () => {
    const record = await slot();
    const [single, multi] = [uuidv7(), uuidv7()];
    expect(await store.multipart.addMultipartUpload(record.id, single, T0, 700)).toBe(1);
    expect(await store.multipart.addMultipartUpload(record.id, multi, T0)).toBe(2);
    expect(await store.multipart.uploadBytes(single)).toBe(700);
    expect(await store.multipart.uploadBytes(single, 1)).toBe(0);
    expect(await store.multipart.uploadBytes(multi)).toBe(0);
    expect(await store.multipart.uploadBytes(uuidv7())).toBeUndefined();
    await store.multipart.setPartSize(record.id, multi, 1, 300);
    await store.multipart.setPartSize(record.id, multi, 2, 50);
    await store.multipart.setPartSize(record.id, multi, 1, 200); // signed again: replaces
    expect(await store.multipart.uploadBytes(multi)).toBe(250);
    expect(await store.multipart.uploadBytes(multi, 2)).toBe(200);
    expect(await store.multipart.slotBytes(record.id)).toBe(950);
    await store.multipart.removeMultipartUpload(single);
    expect(await store.multipart.uploadBytes(single)).toBeUndefined();
    expect(await store.multipart.countMultipartUploads(record.id)).toBe(1);
    expect(await store.multipart.slotBytes(record.id)).toBe(250);
  });

  it('recording an upload ends its reservations (grouped ones too) and forgets its open upload in the same change', async () => {
    const record = await slot();
    const attempt = uuidv7();
    expect(await store.multipart.addMultipartUpload(record.id, attempt, T0)).toBe(1);
    await store.multipart.setPartSize(record.id, attempt, 1, 400);
    await reserve(record, `${attempt}.1`, 400);
    const other = uuidv7(); // another attempt of the slot: untouched
    await store.multipart.addMultipartUpload(record.id, other, T0, 30);
    await reserve(record, other, 30);
    expect(await reservedBytes(record)).toBe(430);

    const uploaded = await store.backups.updateBackup(
      record.id,
      { statuses: ['PENDING_UPLOAD'] },
      { status: 'UPLOADED', blobKey: `${record.blobPath}/${attempt}.bin`, ciphertextSizeBytes: 400, updatedAt: T0 + 1 },
      attempt,
      attempt,
    );
    expect(uploaded).toMatchObject({ id: record.id, status: 'UPLOADED', ciphertextSizeBytes: 400 });
    expect(await store.multipart.uploadBytes(attempt)).toBeUndefined();
    expect(await store.multipart.slotBytes(record.id)).toBe(30);
    expect(await store.multipart.countMultipartUploads(record.id)).toBe(1);
    expect(await reservedBytes(record)).toBe(400 + 30); // the stored bytes, and the other attempt's reservation

    // The update does not apply (no longer PENDING_UPLOAD): the other attempt ends all the same.
    const late = await store.backups.updateBackup(
      record.id,
      { statuses: ['PENDING_UPLOAD'] },
      { status: 'UPLOADED', blobKey: `${record.blobPath}/${other}.bin`, ciphertextSizeBytes: 30, updatedAt: T0 + 2 },
      other,
      other,
    );
    expect(late).toBeUndefined();
    expect(await store.multipart.uploadBytes(other)).toBeUndefined();
    expect(await store.multipart.countMultipartUploads(record.id)).toBe(0);
    expect(await reservedBytes(record)).toBe(400);
    expect((await store.backups.getBackup(record.id))?.blobKey).toBe(`${record.blobPath}/${attempt}.bin`);
  });

  it('a reservation alone ends with the update as before (no open upload named)', async () => {
    const record = await slot();
    const reservation = uuidv7();
    await reserve(record, reservation, 90);
    const uploaded = await store.backups.updateBackup(
      record.id,
      { statuses: ['PENDING_UPLOAD'] },
      { status: 'UPLOADED', blobKey: `${record.blobPath}/x.bin`, ciphertextSizeBytes: 80, updatedAt: T0 + 1 },
      reservation,
    );
    expect(uploaded?.status).toBe('UPLOADED');
    expect(await reservedBytes(record)).toBe(80);
  });
});
