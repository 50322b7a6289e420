/** The Database port on SQL: migrations, probes, counters and cross-node locks, whatever the aggregates. */
import { type Kysely, sql } from 'kysely';
import { migrateToLatest } from '../migrations.js';
import type { Database, QueryCounts } from '../ports/database.js';
import type { SqlContext } from './context.js';

/** First key of every Coffer advisory lock ("COFF"), so they never collide with other applications' locks. */
const ADVISORY_LOCK_CLASS = 0x434f4646;

export class SqlDatabase implements Database {
  readonly kind: Database['kind'];
  /** Database.changeVersion, where the engine has one (SQLite). */
  readonly changeVersion?: () => number;
  /** Exclusive sections held by this process (the whole story for SQLite, which serves one node). */
  private readonly held = new Set<string>();

  constructor(
    private readonly ctx: SqlContext,
    changeVersion?: () => number,
  ) {
    this.kind = ctx.kind;
    if (changeVersion) this.changeVersion = changeVersion;
  }

  queryCounts(): QueryCounts {
    return this.ctx.queryCounts();
  }

  async migrate(): Promise<void> {
    // Kysely looks for its migration tables in every schema unless told which one: with Coffer's tables in
    // another schema of the same database, it would skip creating its own and then fail to lock them.
    const schema =
      this.kind === 'postgres'
        ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(this.ctx.db)).rows[0]?.schema
        : undefined;
    await migrateToLatest(this.ctx.db as Kysely<unknown>, this.kind, schema);
  }

  async close(): Promise<void> {
    await this.ctx.db.destroy();
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.ctx.db);
  }

  async appliedMigrations(): Promise<string[]> {
    // Kysely's bookkeeping table, in the store's schema (see migrate()).
    const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(this.ctx.db);
    return rows.map((row) => row.name);
  }

  async tryExclusive<T>(name: string, task: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
    if (this.held.has(name)) return { ran: false };
    this.held.add(name);
    try {
      if (this.kind === 'sqlite') return { ran: true, value: await task() };
      // A session-level advisory lock on one reserved connection: released by the unlock below, or by
      // PostgreSQL itself when a crashed node's connection goes away. Keyed per schema, so deployments
      // (or test runs) sharing a database in different schemas do not block each other.
      return await this.ctx.db.connection().execute(async (connection) => {
        const key = sql`${sql.lit(ADVISORY_LOCK_CLASS)}, hashtext(current_schema() || ':' || ${name})`;
        const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${key}) as locked`.execute(connection);
        if (!rows[0]?.locked) return { ran: false as const };
        try {
          return { ran: true as const, value: await task() };
        } finally {
          await sql`select pg_advisory_unlock(${key})`.execute(connection);
        }
      });
    } finally {
      this.held.delete(name);
    }
  }
}
