/**
 * Arranging data in a test server's own database, for what no API here can produce: a backup's Object Lock date (s3rver
 * and the fs store have no Object Lock), a hostile server's answer. Data only, never behaviour. SQLite is opened with
 * the server's own driver: a second copy of SQLite in one process (better-sqlite3 beside node:sqlite) releases the
 * server's file locks when it closes, after which the server no longer saw rows other processes wrote.
 */
import path from 'node:path';
import pg from 'pg';
import { SQLITE_FILE } from '../../src/store/sqlite.js';
import { openSqliteDatabase } from '../../src/store/sqlite-driver.js';
import { pgClientConfig } from '../../src/store/postgres.js';
import type { TestServer } from './server.js';

export type Statement = [sql: string, params: unknown[]];

/** Runs statements (with `?` placeholders) on the server's database: its SQLite file, or its PostgreSQL schema. */
export async function onDatabase(server: TestServer, statements: Statement[]): Promise<void> {
  const url = server.parts.config.databaseUrl;
  if (url === null) {
    const db = await openSqliteDatabase(path.join(server.dataDir, SQLITE_FILE), { driver: server.parts.config.sqliteDriver });
    try {
      db.exec('PRAGMA busy_timeout = 5000');
      for (const [statement, params] of statements) db.prepare(statement).run(params);
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client(pgClientConfig(url));
  await client.connect();
  try {
    for (const [statement, params] of statements) {
      let n = 0;
      await client.query(
        statement.replace(/\?/g, () => `$${++n}`),
        params,
      );
    }
  } finally {
    await client.end();
  }
}

/** The Object Lock retain-until date the S3 store records for a backup's object. */
export const lockUntil = (backupId: string, until: number): Statement => [
  'update backups set locked_until = ? where id = ?',
  [until, backupId],
];
