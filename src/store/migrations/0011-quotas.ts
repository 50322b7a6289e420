/** Migration 0011_quotas: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // An account's own storage quota (quota_override 1; quota_bytes null: none) and the bytes uploads in progress
  // have reserved against it (docs/api-rules.md#quota).
  await db.schema
    .alterTable('accounts')
    .addColumn('quota_override', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('accounts').addColumn('quota_bytes', 'bigint').execute();
  await db.schema
    .createTable('upload_reservations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('backup_id', 'text', (c) => c.notNull())
    .addColumn('bytes', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('upload_reservations_account').on('upload_reservations').column('account_id').execute();
}
