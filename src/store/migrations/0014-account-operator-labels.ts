/** Migration 0014_account_operator_labels: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // The operator's own name for an account ("ACME web team"), shown and searched in both consoles and
  // `coffer admin` (docs/operations.md#operator-console); not the host label its owner gives a host account.
  await db.schema.alterTable('accounts').addColumn('operator_label', 'text').execute();
}
