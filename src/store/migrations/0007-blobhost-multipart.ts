/** Migration 0007_blobhost_multipart: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // The blob host's open multipart uploads per slot and the bytes of their stored parts, so the slot's
  // limits are checked without listing the object store (src/services/blob-host.ts).
  await db.schema
    .createTable('blobhost_uploads')
    .addColumn('upload_id', 'text', (c) => c.primaryKey())
    .addColumn('backup_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('blobhost_uploads_backup').on('blobhost_uploads').column('backup_id').execute();
  await db.schema
    .createTable('blobhost_parts')
    .addColumn('upload_id', 'text', (c) => c.notNull())
    .addColumn('part_number', 'integer', (c) => c.notNull())
    .addColumn('backup_id', 'text', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('blobhost_parts_pk', ['upload_id', 'part_number'])
    .execute();
  await db.schema.createIndex('blobhost_parts_backup').on('blobhost_parts').column('backup_id').execute();
}
