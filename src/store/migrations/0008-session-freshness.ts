/** Migration 0008_session_freshness: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A key made in a console session carries that session's sign-in time, and a session opened with it inherits
  // it: a stale session cannot make itself fresh by minting a key (docs/console.md#fresh-sign-in).
  await db.schema.alterTable('api_keys').addColumn('minted_fresh_at', 'bigint').execute();
  await db.schema.alterTable('sessions').addColumn('fresh_at', 'bigint').execute();
}
