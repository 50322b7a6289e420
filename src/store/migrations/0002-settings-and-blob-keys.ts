/** Migration 0002_settings_and_blob_keys: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Secrets shared by every node (e.g. the blob-host signing token), created once at first start.
  await db.schema
    .createTable('settings')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  // The orphan sweeper asks "which of these blob keys does a record still reference?".
  await db.schema.createIndex('backups_blob_key').on('backups').column('blob_key').execute();
}
