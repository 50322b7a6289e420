import fs from 'node:fs';
import path from 'node:path';
import { Kysely, SqliteDialect, type SqliteDatabase, type SqliteStatement } from 'kysely';
import type { Database } from './schema.js';
import { SqlStore } from './sql-store.js';
import { openSqliteDatabase, type SqliteConnection, type SqliteDriverName } from './sqlite-driver.js';

export const SQLITE_FILE = 'coffer.sqlite';

/**
 * The embedded default: one SQLite file in the data directory, WAL, fully synchronous commits. `driver`:
 * COFFER_SQLITE_DRIVER; null: the best one this runtime has (src/store/sqlite-driver.ts).
 */
export async function openSqliteStore(dataDir: string, driver: SqliteDriverName | null = null): Promise<SqlStore> {
  fs.mkdirSync(dataDir, { recursive: true });
  const database = await openSqliteDatabase(path.join(dataDir, SQLITE_FILE), { driver });
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('PRAGMA synchronous = FULL');
  database.exec('PRAGMA busy_timeout = 5000');
  database.exec('PRAGMA foreign_keys = ON');
  // Run directly on the connection, outside Kysely: one synchronous call, never inside another statement.
  const dataVersion = database.prepare('PRAGMA data_version');
  return new SqlStore('sqlite', new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(database) }) }), () =>
    Number((dataVersion.get([]) as { data_version: number | bigint }).data_version),
  );
}

/**
 * Kysely's SQLite driver prepares every statement anew; preparing was ~15% of the CPU of a metadata read
 * (bench P3, BENCHMARKS.md). Statements are reused by SQL text instead (both drivers run them synchronously,
 * so one statement is never in use twice at once; the store never streams results). Bounded: variable-length
 * IN lists make distinct texts.
 */
function withStatementCache(database: SqliteConnection, max = 256): SqliteDatabase {
  const statements = new Map<string, SqliteStatement>();
  return {
    close: () => database.close(),
    prepare(sql: string): SqliteStatement {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = database.prepare(sql);
        if (statements.size >= max) statements.delete(statements.keys().next().value!);
        statements.set(sql, statement);
      }
      return statement;
    },
  };
}

/**
 * A consistent copy of the live database at `target` (which must not exist), taken with `VACUUM INTO` while the
 * server keeps running: one read transaction, the same statement on either driver. Returns the copy's pages.
 */
export async function snapshotSqlite(dataDir: string, target: string, driver: SqliteDriverName | null = null): Promise<{ pages: number }> {
  const source = path.join(dataDir, SQLITE_FILE);
  if (!fs.existsSync(source)) throw new Error(`no database at ${source}`);
  const database = await openSqliteDatabase(source, { readonly: true, driver });
  try {
    database.exec('PRAGMA busy_timeout = 5000');
    database.prepare('VACUUM INTO ?').run([target]);
  } finally {
    database.close();
  }
  const copy = await openSqliteDatabase(target, { readonly: true, driver });
  try {
    const { page_count } = copy.prepare('PRAGMA page_count').get([]) as { page_count: number };
    return { pages: page_count };
  } finally {
    copy.close();
  }
}
