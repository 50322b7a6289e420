/** Migration 0003_console_sessions: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // The console's one-time sign-in links and browser sessions: secrets are stored as SHA-256 hashes only.
  await db.schema
    .createTable('login_links')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .execute();
  await db.schema
    .createTable('sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('key_id', 'text', (c) => c.references('api_keys.id'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('login_links_expires').on('login_links').column('expires_at').execute();
  await db.schema.createIndex('sessions_expires').on('sessions').column('expires_at').execute();
  // The vault page shows when the key material was first stored and when it was last rotated.
  await db.schema.alterTable('vaults').addColumn('created_at', 'bigint').execute();
}
