/** Schema migrations shared by SQLite and PostgreSQL (Kysely's schema builder emits each dialect's DDL). */
import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';

/** The channel on which PostgreSQL announces changes of cached rows, by account id (src/store/cached-store.ts). */
export const CHANGE_CHANNEL = 'coffer_changes';

/**
 * PostgreSQL only: every committed change of a row the metadata cache holds (accounts, API keys, vaults, backups)
 * sends `NOTIFY coffer_changes, '<account id>'`, whoever made it: this node, another node, `coffer admin`, or an
 * operator's SQL. NOTIFY is transactional (delivered at commit, duplicates within a transaction merged).
 */
async function changeNotifications(db: Kysely<unknown>): Promise<void> {
  for (const [fn, column] of [
    ['coffer_notify_account_change', 'id'],
    ['coffer_notify_owner_change', 'account_id'],
  ] as const) {
    await sql`
      create or replace function ${sql.id(fn)}() returns trigger language plpgsql as $$
      begin
        if tg_op = 'DELETE' then
          perform pg_notify(${sql.lit(CHANGE_CHANNEL)}, old.${sql.id(column)});
        else
          perform pg_notify(${sql.lit(CHANGE_CHANNEL)}, new.${sql.id(column)});
        end if;
        return null;
      end $$`.execute(db);
  }
  for (const [table, fn] of [
    ['accounts', 'coffer_notify_account_change'],
    ['api_keys', 'coffer_notify_owner_change'],
    ['vaults', 'coffer_notify_owner_change'],
    ['backups', 'coffer_notify_owner_change'],
  ] as const) {
    await sql`
      create trigger ${sql.id(`${table}_notify_change`)} after insert or update or delete on ${sql.table(table)}
      for each row execute function ${sql.id(fn)}()`.execute(db);
  }
}

const migrations = (kind: 'sqlite' | 'postgres'): Record<string, Migration> => ({
  '0001_initial': {
    async up(db: Kysely<unknown>) {
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
    },
  },
  '0002_settings_and_blob_keys': {
    async up(db: Kysely<unknown>) {
      // Secrets shared by every node (e.g. the blob-host signing token), created once at first start.
      await db.schema
        .createTable('settings')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      // The orphan sweeper asks "which of these blob keys does a record still reference?".
      await db.schema.createIndex('backups_blob_key').on('backups').column('blob_key').execute();
    },
  },
  '0003_console_sessions': {
    async up(db: Kysely<unknown>) {
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
    },
  },
  '0004_append_only_keys_and_audit': {
    async up(db: Kysely<unknown>) {
      // Append-only keys (0 or 1): existing keys keep what they could do.
      await db.schema
        .alterTable('api_keys')
        .addColumn('append_only', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      // The audit trail: ids, times and short words only (never secrets), at most AUDIT_MAX_ENTRIES per account and outcome.
      await db.schema
        .createTable('audit_events')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('at', 'bigint', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('outcome', 'text', (c) => c.notNull())
        .addColumn('actor_kind', 'text', (c) => c.notNull())
        .addColumn('actor_id', 'text')
        .addColumn('address', 'text')
        .addColumn('target', 'text')
        .addColumn('detail', 'text')
        .execute();
      await db.schema.createIndex('audit_events_account_at').on('audit_events').columns(['account_id', 'at', 'id']).execute();
    },
  },
  '0005_deletion_grace_and_vault_history': {
    async up(db: Kysely<unknown>) {
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
    },
  },
  '0006_change_notifications': {
    async up(db: Kysely<unknown>) {
      // SQLite needs nothing: the cache sees other connections' commits in PRAGMA data_version.
      if (kind === 'postgres') await changeNotifications(db);
    },
  },
  '0007_blobhost_multipart': {
    async up(db: Kysely<unknown>) {
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
    },
  },
  '0008_session_freshness': {
    async up(db: Kysely<unknown>) {
      // A key made in a console session carries that session's sign-in time, and a session opened with it inherits
      // it: a stale session cannot make itself fresh by minting a key (docs/console.md#fresh-sign-in).
      await db.schema.alterTable('api_keys').addColumn('minted_fresh_at', 'bigint').execute();
      await db.schema.alterTable('sessions').addColumn('fresh_at', 'bigint').execute();
    },
  },
  '0009_key_labels': {
    async up(db: Kysely<unknown>) {
      // The owner's name for a key, shown in the key lists and the audit trail (docs/console.md "API keys").
      await db.schema.alterTable('api_keys').addColumn('label', 'text').execute();
    },
  },
  '0010_host_accounts': {
    async up(db: Kysely<unknown>) {
      // A host account belongs to an owner account: the owner reads its backups and its vault follows the owner's
      // (docs/client.md#hosts-with-their-own-schedule). One level only: an owner is never itself a host.
      await db.schema
        .alterTable('accounts')
        .addColumn('owner_account_id', 'text', (c) => c.references('accounts.id'))
        .execute();
      await db.schema.alterTable('accounts').addColumn('label', 'text').execute();
      await db.schema.createIndex('accounts_owner').on('accounts').column('owner_account_id').execute();
    },
  },
  '0011_quotas': {
    async up(db: Kysely<unknown>) {
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
    },
  },
  '0012_signin_attempts': {
    async up(db: Kysely<unknown>) {
      // Console sign-in attempts per client address and fixed window, in the database so every node counts
      // against one limit (src/console/session-routes.ts).
      await db.schema
        .createTable('signin_attempts')
        .addColumn('address', 'text', (c) => c.primaryKey())
        .addColumn('window_start', 'bigint', (c) => c.notNull())
        .addColumn('count', 'integer', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('signin_attempts_window').on('signin_attempts').column('window_start').execute();
    },
  },
  '0013_operator_sessions': {
    async up(db: Kysely<unknown>) {
      // The operator console's one-time links and sessions (docs/operations.md#operator-console): the same rules as
      // the owners' (hashes only, single use, short-lived), in tables of their own, so that an operator's token can
      // never open an owner's session nor the reverse. `operator`: who made the link (the OS user of `coffer admin`).
      await db.schema
        .createTable('operator_login_links')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('operator', 'text')
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('used_at', 'bigint')
        .execute();
      await db.schema
        .createTable('operator_sessions')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('operator', 'text')
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .execute();
    },
  },
  '0014_account_operator_labels': {
    async up(db: Kysely<unknown>) {
      // The operator's own name for an account ("ACME web team"), shown and searched in both consoles and
      // `coffer admin` (docs/operations.md#operator-console); not the host label its owner gives a host account.
      await db.schema.alterTable('accounts').addColumn('operator_label', 'text').execute();
    },
  },
  '0015_fleet_plans': {
    async up(db: Kysely<unknown>) {
      // A host account is on its owner's plan and stores under its owner's quota (docs/operations.md#fleets): host
      // accounts made before kept the plan they were made on and could hold a quota of their own; both go.
      await sql`
        update accounts set
          plan = (select o.plan from accounts o where o.id = accounts.owner_account_id),
          quota_override = 0,
          quota_bytes = null
        where owner_account_id is not null`.execute(db);
    },
  },
});

/** `migrationTableSchema`: the PostgreSQL schema that holds Kysely's own bookkeeping tables (the store's). */
export async function migrateToLatest(db: Kysely<unknown>, kind: 'sqlite' | 'postgres', migrationTableSchema?: string): Promise<void> {
  const provider: MigrationProvider = { getMigrations: async () => migrations(kind) };
  const { error, results } = await new Migrator({ db, provider, migrationTableSchema }).migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`database migration failed${failed ? ` at ${failed.migrationName}` : ''}`, { cause: error });
  }
}
