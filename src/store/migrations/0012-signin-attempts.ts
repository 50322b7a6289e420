/** Migration 0012_signin_attempts: recorded under this name, applied in order by ../migrations.ts; released, so never edited. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Console sign-in attempts per client address and fixed window, in the database so every node counts
  // against one limit (src/console/session-routes.ts).
  await db.schema
    .createTable('signin_attempts')
    .addColumn('address', 'text', (c) => c.primaryKey())
    .addColumn('window_start', 'bigint', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('signin_attempts_window').on('signin_attempts').column('window_start').execute();
}
