/** Migration 0013_operator_sessions: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
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
}
