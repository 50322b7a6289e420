/**
 * Migration 0015_fleet_plans on a database as the code before it left it (docs/operations.md#fleets): a host account
 * on another plan than its owner's (the owner's plan changed after it was made) and with a quota of its own. After
 * the migration it is on its owner's plan and has no quota of its own (its owner's covers it). SQLite and PostgreSQL.
 */
import Database from 'better-sqlite3';
import path from 'node:path';
import pg from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { describe, expect, it } from 'vitest';
import { SQLITE_FILE, openSqliteStores } from '../../src/store/sqlite.js';
import { openPostgresStores, pgClientConfig } from '../../src/store/postgres.js';
import type { Account } from '../../src/domain/entities.js';
import type { Stores } from '../../src/store/ports/stores.js';
import { createTestSchema, requirePg, skipPg } from '../helpers/pg.js';
import { tempDir } from '../helpers/tmp.js';

const account = (plan: Account['plan'], ownerAccountId?: string): Account => ({
  id: uuidv7(),
  plan,
  createdAt: Date.now(),
  lastReadyCreatedAt: null,
  deletionGraceDays: 0,
  ...(ownerAccountId ? { ownerAccountId, label: 'web' } : {}),
});

/**
 * The rows as the code before 0015 could leave them, and 0015 not applied yet: what the migrations after it made is
 * undone too (Kysely applies migrations in order only).
 */
const BEFORE = (hostId: string) => [
  `update accounts set plan = 'pro', quota_override = 1, quota_bytes = 5 where id = '${hostId}'`,
  `drop table restore_attestations`,
  `alter table backups drop column locked_until`,
  `alter table backups drop column blob_version`,
  `delete from kysely_migration where name >= '0015_fleet_plans'`,
];

async function check(open: () => Promise<Stores>, runRaw: (statements: string[]) => Promise<void>) {
  let store = await open();
  await store.database.migrate();
  const owner = account('free');
  await store.accounts.createAccount(owner);
  const host = await store.accounts.createAccount(account('free', owner.id));
  await store.database.close();
  await runRaw(BEFORE(host.id));

  store = await open();
  try {
    expect(await store.accounts.getAccount(host.id)).toMatchObject({ plan: 'pro', quotaOverride: 5 });
    expect(await store.database.appliedMigrations()).not.toContain('0015_fleet_plans');
    await store.database.migrate();
    const after = await store.accounts.getAccount(host.id);
    expect(after).toMatchObject({ plan: 'free', ownerAccountId: owner.id });
    expect(after).not.toHaveProperty('quotaOverride');
    expect(await store.accounts.getAccount(owner.id)).toMatchObject({ plan: 'free' });
    expect(await store.database.appliedMigrations()).toContain('0015_fleet_plans');
  } finally {
    await store.database.close();
  }
}

describe('migration 0015_fleet_plans', () => {
  it('SQLite: a host account made before goes on its owner plan and loses its own quota', async () => {
    const dir = tempDir('coffer-fleet-migration-');
    await check(
      () => openSqliteStores(dir),
      async (statements) => {
        const db = new Database(path.join(dir, SQLITE_FILE));
        try {
          for (const statement of statements) db.prepare(statement).run();
        } finally {
          db.close();
        }
      },
    );
  });

  it.skipIf(skipPg)('PostgreSQL: a host account made before goes on its owner plan and loses its own quota', async () => {
    requirePg();
    const schema = await createTestSchema('coffer_fleet_migration');
    try {
      await check(
        async () => openPostgresStores(schema.url),
        async (statements) => {
          const client = new pg.Client(pgClientConfig(schema.url));
          await client.connect();
          try {
            for (const statement of statements) await client.query(statement);
          } finally {
            await client.end();
          }
        },
      );
    } finally {
      await schema.drop();
    }
  });
});
