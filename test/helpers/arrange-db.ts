/**
 * Arranging data in a test server's own database, for what no API here can produce: a backup's Object Lock date (s3rver
 * and the fs store have no Object Lock). Data only, never behaviour.
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { SQLITE_FILE } from '../../src/store/sqlite.js';
import { pgClientConfig } from '../../src/store/postgres.js';
import type { TestServer } from './server.js';

export type Statement = [sql: string, params: unknown[]];

/** Runs statements (with `?` placeholders) on the server's database: its SQLite file, or its PostgreSQL schema. */
export async function onDatabase(server: TestServer, statements: Statement[]): Promise<void> {
  const url = server.parts.config.databaseUrl;
  if (url === null) {
    const db = new Database(path.join(server.dataDir, SQLITE_FILE));
    try {
      for (const [statement, params] of statements) db.prepare(statement).run(...params);
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
