/**
 * The scale-out metadata store: the same SqlStore on Kysely's PostgreSQL dialect, so both engines share one
 * implementation and one set of migrations. Cadence and one-slot-in-flight stay enforced by the database
 * (a row lock on the account inside the create transaction), so any number of nodes may share it.
 */
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';
import { SqlStore } from './sql-store.js';

export interface PostgresOptions {
  /** Pool size per node; the sweeper reserves one connection while it holds its advisory lock. */
  maxConnections?: number;
}

/** Connection settings shared by the store's pool and the status bus's LISTEN connection. */
export function pgClientConfig(connectionString: string): pg.ClientConfig {
  return {
    connectionString,
    application_name: 'coffer',
    keepAlive: true,
    connectionTimeoutMillis: 10_000,
  };
}

export function openPostgresStore(connectionString: string, options: PostgresOptions = {}): SqlStore {
  const pool = new pg.Pool({
    ...pgClientConfig(connectionString),
    max: options.maxConnections ?? 10,
    idleTimeoutMillis: 30_000,
  });
  // An idle client that loses its connection emits 'error' on the pool; without a listener that would
  // crash the process. The next query simply gets a fresh connection.
  pool.on('error', () => undefined);
  return new SqlStore('postgres', new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }));
}
