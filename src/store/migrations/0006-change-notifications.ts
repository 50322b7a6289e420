/** Migration 0006_change_notifications: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import { type Kysely, sql } from 'kysely';

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

export async function up(db: Kysely<unknown>, kind: 'sqlite' | 'postgres'): Promise<void> {
  // SQLite needs nothing: the cache sees other connections' commits in PRAGMA data_version.
  if (kind === 'postgres') await changeNotifications(db);
}
