/** Every port on one SQL database: one context (handle, counters, compiled statements) shared by all of them. */
import type { Kysely } from 'kysely';
import type { Stores } from '../ports/stores.js';
import type { Database as Schema } from '../schema.js';
import { SqlAccountStore } from './accounts.js';
import { SqlAttestationStore } from './attestations.js';
import { SqlAuditStore } from './audit.js';
import { SqlBackupStore } from './backups.js';
import { SqlContext } from './context.js';
import { SqlDatabase } from './database.js';
import { SqlKeyStore } from './keys.js';
import { SqlMultipartStore } from './multipart.js';
import { SqlOperatorSessionStore } from './operator-sessions.js';
import { SqlSessionStore } from './sessions.js';
import { SqlSettingStore } from './settings.js';
import { SqlSignInStore } from './sign-ins.js';
import { SqlUsageStore } from './usage.js';
import { SqlVaultStore } from './vaults.js';

/** The ports of the database behind `db` (SQLite or PostgreSQL: only the Kysely instance differs). */
export function sqlStores(kind: 'sqlite' | 'postgres', db: Kysely<Schema>, changeVersion?: () => number): Stores {
  const ctx = new SqlContext(kind, db);
  return {
    database: new SqlDatabase(ctx, changeVersion),
    accounts: new SqlAccountStore(ctx),
    usage: new SqlUsageStore(ctx),
    keys: new SqlKeyStore(ctx),
    sessions: new SqlSessionStore(ctx),
    operatorSessions: new SqlOperatorSessionStore(ctx),
    signIns: new SqlSignInStore(ctx),
    vaults: new SqlVaultStore(ctx),
    backups: new SqlBackupStore(ctx),
    audit: new SqlAuditStore(ctx),
    settings: new SqlSettingStore(ctx),
    multipart: new SqlMultipartStore(ctx),
    attestations: new SqlAttestationStore(ctx),
  };
}
