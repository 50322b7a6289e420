import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
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
  return new SqlStore('sqlite', new Kysely<Database>({ dialect: new SqliteDialect({ database }) }));
}
