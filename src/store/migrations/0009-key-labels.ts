/** Migration 0009_key_labels: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // The owner's name for a key, shown in the key lists and the audit trail (docs/console.md "API keys").
  await db.schema.alterTable('api_keys').addColumn('label', 'text').execute();
}
