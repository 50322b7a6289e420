/**
 * Schema migrations shared by SQLite and PostgreSQL, one file each in ./migrations/ (Kysely's schema builder emits
 * each dialect's DDL; a migration that differs by dialect takes the dialect). A migration, once released, is never
 * edited: a change of the schema is a new file and a new row below.
 */
import { type Kysely, type Migration, type MigrationProvider, Migrator } from 'kysely';
import { up as m0001 } from './migrations/0001-initial.js';
import { up as m0002 } from './migrations/0002-settings-and-blob-keys.js';
import { up as m0003 } from './migrations/0003-console-sessions.js';
import { up as m0004 } from './migrations/0004-append-only-keys-and-audit.js';
import { up as m0005 } from './migrations/0005-deletion-grace-and-vault-history.js';
import { up as m0006 } from './migrations/0006-change-notifications.js';
import { up as m0007 } from './migrations/0007-blobhost-multipart.js';
import { up as m0008 } from './migrations/0008-session-freshness.js';
import { up as m0009 } from './migrations/0009-key-labels.js';
import { up as m0010 } from './migrations/0010-host-accounts.js';
import { up as m0011 } from './migrations/0011-quotas.js';
import { up as m0012 } from './migrations/0012-signin-attempts.js';
import { up as m0013 } from './migrations/0013-operator-sessions.js';
import { up as m0014 } from './migrations/0014-account-operator-labels.js';
import { up as m0015 } from './migrations/0015-fleet-plans.js';
import { up as m0016 } from './migrations/0016-object-lock.js';
import { up as m0017 } from './migrations/0017-restore-attestations.js';

export { CHANGE_CHANNEL } from './migrations/0006-change-notifications.js';

type Dialect = 'sqlite' | 'postgres';

/**
 * Every migration under the name recorded in Kysely's migration table when it ran: a database knows what it has by
 * these names, so they never change. Kysely applies them in the order of their names.
 */
export const MIGRATIONS: Record<string, (db: Kysely<unknown>, kind: Dialect) => Promise<void>> = {
  '0001_initial': m0001,
  '0002_settings_and_blob_keys': m0002,
  '0003_console_sessions': m0003,
  '0004_append_only_keys_and_audit': m0004,
  '0005_deletion_grace_and_vault_history': m0005,
  '0006_change_notifications': m0006,
  '0007_blobhost_multipart': m0007,
  '0008_session_freshness': m0008,
  '0009_key_labels': m0009,
  '0010_host_accounts': m0010,
  '0011_quotas': m0011,
  '0012_signin_attempts': m0012,
  '0013_operator_sessions': m0013,
  '0014_account_operator_labels': m0014,
  '0015_fleet_plans': m0015,
  '0016_object_lock': m0016,
  '0017_restore_attestations': m0017,
};

const migrations = (kind: Dialect): Record<string, Migration> =>
  Object.fromEntries(Object.entries(MIGRATIONS).map(([name, up]) => [name, { up: (db: Kysely<unknown>) => up(db, kind) }]));

/** `migrationTableSchema`: the PostgreSQL schema that holds Kysely's own bookkeeping tables (the store's). */
export async function migrateToLatest(db: Kysely<unknown>, kind: Dialect, migrationTableSchema?: string): Promise<void> {
  const provider: MigrationProvider = { getMigrations: async () => migrations(kind) };
  const { error, results } = await new Migrator({ db, provider, migrationTableSchema }).migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`database migration failed${failed ? ` at ${failed.migrationName}` : ''}`, { cause: error });
  }
}
