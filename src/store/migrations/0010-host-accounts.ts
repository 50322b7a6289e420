/** Migration 0010_host_accounts: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A host account belongs to an owner account: the owner reads its backups and its vault follows the owner's
  // (docs/client.md#hosts-with-their-own-schedule). One level only: an owner is never itself a host.
  await db.schema
    .alterTable('accounts')
    .addColumn('owner_account_id', 'text', (c) => c.references('accounts.id'))
    .execute();
  await db.schema.alterTable('accounts').addColumn('label', 'text').execute();
  await db.schema.createIndex('accounts_owner').on('accounts').column('owner_account_id').execute();
}
