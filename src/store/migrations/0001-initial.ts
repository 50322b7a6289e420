/** Migration 0001_initial: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('accounts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('plan', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_ready_created_at', 'bigint')
    .execute();
  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint')
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema
    .createTable('vaults')
    .addColumn('account_id', 'text', (c) => c.primaryKey().references('accounts.id'))
    .addColumn('crypto_version', 'text', (c) => c.notNull())
    .addColumn('kdf_salt', 'text', (c) => c.notNull())
    .addColumn('kdf_opslimit', 'bigint', (c) => c.notNull())
    .addColumn('kdf_memlimit', 'bigint', (c) => c.notNull())
    .addColumn('wrapped_master_key', 'text', (c) => c.notNull())
    .addColumn('wrapped_master_key_nonce', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('backups')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('blob_path', 'text', (c) => c.notNull())
    .addColumn('blob_key', 'text')
    .addColumn('ciphertext_size_bytes', 'bigint')
    .addColumn('plaintext_size_bytes', 'bigint')
    .addColumn('client_version', 'text')
    .addColumn('hostapp_version', 'text')
    .addColumn('crypto_version', 'text', (c) => c.notNull())
    .addColumn('wrapped_dek', 'text')
    .addColumn('wrapped_dek_nonce', 'text')
    .addColumn('encrypted_metadata', 'text')
    .addColumn('encrypted_metadata_nonce', 'text')
    .addColumn('deleted_at', 'bigint')
    .execute();
  await db.schema.createIndex('backups_account_created').on('backups').columns(['account_id', 'created_at']).execute();
  await db.schema.createIndex('backups_status_expires').on('backups').columns(['status', 'expires_at']).execute();
  await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute();
}
