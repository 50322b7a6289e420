/** Migration 0004_append_only_keys_and_audit: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
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
}
