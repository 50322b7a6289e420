/** Migration 0005_deletion_grace_and_vault_history: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Days a deleted READY backup stays restorable; 0 keeps today's immediate delete.
  await db.schema
    .alterTable('accounts')
    .addColumn('deletion_grace_days', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  // A DELETING record in its grace: when the sweeper may remove its ciphertext (null: at once).
  await db.schema.alterTable('backups').addColumn('purge_after', 'bigint').execute();
  // Envelopes replaced by rotate, reset or a restore, kept for the grace so the owner can roll back.
  await db.schema
    .createTable('vault_history')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('crypto_version', 'text', (c) => c.notNull())
    .addColumn('kdf_salt', 'text', (c) => c.notNull())
    .addColumn('kdf_opslimit', 'bigint', (c) => c.notNull())
    .addColumn('kdf_memlimit', 'bigint', (c) => c.notNull())
    .addColumn('wrapped_master_key', 'text', (c) => c.notNull())
    .addColumn('wrapped_master_key_nonce', 'text', (c) => c.notNull())
    .addColumn('stored_at', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint')
    .addColumn('replaced_at', 'bigint', (c) => c.notNull())
    .addColumn('replaced_by', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('vault_history_account').on('vault_history').columns(['account_id', 'replaced_at']).execute();
  await db.schema.createIndex('vault_history_expires').on('vault_history').column('expires_at').execute();
}
