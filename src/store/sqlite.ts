import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, type SqliteDatabase, type SqliteStatement } from 'kysely';
import type { Database } from './schema.js';
import { SqlStore } from './sql-store.js';

export const SQLITE_FILE = 'coffer.sqlite';

/** The embedded default: one SQLite file in the data directory, WAL, fully synchronous commits. */
export function openSqliteStore(dataDir: string): SqlStore {
  fs.mkdirSync(dataDir, { recursive: true });
  const database = new BetterSqlite3(path.join(dataDir, SQLITE_FILE));
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = FULL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  return new SqlStore('sqlite', new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(database) }) }));
}

/**
 * Kysely's SQLite driver prepares every statement anew; preparing was ~15% of the CPU of a metadata read
 * (bench P3, BENCHMARKS.md). Statements are reused by SQL text instead (better-sqlite3 runs them synchronously,
 * so one statement is never in use twice at once; the store never streams results). Bounded: variable-length
 * IN lists make distinct texts.
 */
function withStatementCache(database: BetterSqlite3.Database, max = 256): SqliteDatabase {
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
 * A consistent copy of the live database at `target`, taken with SQLite's online backup API while the
 * server keeps running. Returns the number of pages copied.
 */
export async function snapshotSqlite(dataDir: string, target: string): Promise<{ pages: number }> {
  const source = path.join(dataDir, SQLITE_FILE);
  if (!fs.existsSync(source)) throw new Error(`no database at ${source}`);
  const database = new BetterSqlite3(source, { fileMustExist: true });
  try {
    database.pragma('busy_timeout = 5000');
    const { totalPages } = await database.backup(target);
    return { pages: totalPages };
  } finally {
    database.close();
  }
}
