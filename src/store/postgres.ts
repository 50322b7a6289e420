/**
 * The scale-out metadata store: the same SQL ports (src/store/sql/) on Kysely's PostgreSQL dialect, so both engines share one
 * implementation and one set of migrations. Cadence and one-slot-in-flight stay enforced by the database
 * (a row lock on the account inside the create transaction), so any number of nodes may share it.
 */
import { type DatabaseIntrospector, Kysely, PostgresDialect, PostgresIntrospector, sql, type TableMetadata } from 'kysely';
import pg from 'pg';
import type { Stores } from './ports/stores.js';
import type { Database } from './schema.js';
import { sqlStores } from './sql/index.js';

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

export function openPostgresStores(connectionString: string, options: PostgresOptions = {}): Stores {
  const pool = new pg.Pool({
    ...pgClientConfig(connectionString),
    max: options.maxConnections ?? 10,
    idleTimeoutMillis: 30_000,
  });
  // An idle client that loses its connection emits 'error' on the pool; without a listener that would
  // crash the process. The next query simply gets a fresh connection.
  pool.on('error', () => undefined);
  return sqlStores('postgres', new Kysely<Database>({ dialect: new OwnSchemaDialect({ pool }) }));
}

/**
 * Kysely's PostgreSQL dialect, whose table listing covers only the connection's own schema (the first of its
 * search_path), where Coffer's tables and Kysely's bookkeeping tables are. Kysely's own listing reads every schema of
 * the database and checks each by name (kysely-org/kysely#1419, #1537), so a schema that anyone dropped during that
 * query failed the migration at start with "schema … does not exist". The migrator, the listing's only user, reads
 * the tables' names and schemas; the columns are not listed.
 */
class OwnSchemaDialect extends PostgresDialect {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Kysely's own signature
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new OwnSchemaIntrospector(db);
  }
}

class OwnSchemaIntrospector extends PostgresIntrospector {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Kysely's own signature
  constructor(private readonly db: Kysely<any>) {
    super(db);
  }

  override async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ name: string; schema: string; kind: string }>`
      select c.relname as name, n.nspname as schema, c.relkind as kind
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where n.nspname = current_schema() and c.relkind in ('r', 'v', 'p')`.execute(this.db);
    return rows.map((row) => ({ name: row.name, schema: row.schema, isView: row.kind === 'v', columns: [] }));
  }
}
