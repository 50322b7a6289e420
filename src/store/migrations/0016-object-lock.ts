/** Migration 0016_object_lock: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // S3 Object Lock (docs/deploy.md#object-lock): until when the store itself refuses to remove a backup's object
  // (epoch ms; null: not locked), and the object version Coffer wrote, which it reads and removes by id so that a
  // newer version or a delete marker put by someone else never stands in for it.
  await db.schema.alterTable('backups').addColumn('locked_until', 'bigint').execute();
  await db.schema.alterTable('backups').addColumn('blob_version', 'text').execute();
}
