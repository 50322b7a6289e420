/** Migration 0017_restore_attestations: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Restore drills (docs/crypto.md#restore-attestations): what a drill reported, as its client authenticated it
  // (payload and mac, stored as sent), and the few fields the server reads from the payload to show it without
  // being able to check it (checked_at, result). recorded_at and recorded_by are the server's own.
  await db.schema
    .createTable('restore_attestations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('backup_id', 'text', (c) => c.notNull())
    .addColumn('recorded_at', 'bigint', (c) => c.notNull())
    .addColumn('recorded_by', 'text', (c) => c.notNull())
    .addColumn('checked_at', 'bigint', (c) => c.notNull())
    .addColumn('result', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('mac', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('restore_attestations_backup').on('restore_attestations').columns(['backup_id', 'recorded_at']).execute();
  await db.schema.createIndex('restore_attestations_account').on('restore_attestations').columns(['account_id', 'recorded_at']).execute();
}
