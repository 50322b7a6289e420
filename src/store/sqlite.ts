import fs from 'node:fs';
import path from 'node:path';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  type QueryResult,
  SqliteDialect,
  type SqliteDatabase,
  type SqliteStatement,
} from 'kysely';
import type { Stores } from './ports/stores.js';
import type { Database } from './schema.js';
import { sqlStores } from './sql/index.js';
import { openSqliteDatabase, type SqliteConnection, type SqliteDriverName } from './sqlite-driver.js';

export const SQLITE_FILE = 'coffer.sqlite';

/**
 * The embedded default: one SQLite file in the data directory, WAL, fully synchronous commits. `driver`:
 * COFFER_SQLITE_DRIVER; null: the best one this runtime has (src/store/sqlite-driver.ts).
 */
export async function openSqliteStores(dataDir: string, driver: SqliteDriverName | null = null): Promise<Stores> {
  fs.mkdirSync(dataDir, { recursive: true });
  const database = await openSqliteDatabase(path.join(dataDir, SQLITE_FILE), { driver });
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('PRAGMA synchronous = FULL');
  database.exec('PRAGMA busy_timeout = 5000');
  database.exec('PRAGMA foreign_keys = ON');
  // Run directly on the connection, outside Kysely: one synchronous call, never inside another statement.
  const dataVersion = database.prepare('PRAGMA data_version');
  return sqlStores('sqlite', new Kysely<Database>({ dialect: new GroupCommitDialect(withStatementCache(database)) }), () =>
    Number((dataVersion.get([]) as { data_version: number | bigint }).data_version),
  );
}

/**
 * Kysely's SQLite driver prepares every statement anew, a cost a metadata read must not pay every time (P3 in
 * BENCHMARKS.md). Statements are reused by SQL text instead (both drivers run them synchronously,
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

/**
 * Group commit. With `synchronous = FULL` every COMMIT fsyncs the WAL, on the event loop (both drivers are
 * synchronous): one COMMIT per write would stop the main thread once per write, as often as a fleet uploading at
 * once writes (P8 in BENCHMARKS.md). Here the writes of one turn of the event loop share one COMMIT: the first
 * write (or transaction) opens a physical transaction and schedules its COMMIT (setImmediate); each store
 * transaction runs inside it as a savepoint (rolled back alone when it fails), a single write statement as itself.
 * Nothing is answered before it is durable: every statement and transaction that ran inside the physical
 * transaction (reads too, so none sees a row before it is committed) resolves only once the COMMIT has returned,
 * and fails if the COMMIT fails. Reads outside one run as before.
 */
class GroupCommitDialect extends SqliteDialect {
  constructor(private readonly database: SqliteDatabase) {
    super({ database });
  }

  override createDriver(): Driver {
    return new GroupCommitDriver(this.database);
  }
}

interface Group {
  done: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

const SAVEPOINT = 'coffer_group_member';
const WRITE = /^\s*(insert|update|delete|replace)\b/i;

class GroupCommitDriver implements Driver {
  private locked: Promise<void> | null = null;
  private unlock: (() => void) | null = null;
  /** The physical transaction open now, if any. */
  private group: Group | null = null;

  constructor(private readonly database: SqliteDatabase) {}

  async init(): Promise<void> {}

  hasGroup(): boolean {
    return this.group !== null;
  }

  private async lock(): Promise<void> {
    while (this.locked) await this.locked;
    this.locked = new Promise((resolve) => (this.unlock = resolve));
  }

  private release(): void {
    const unlock = this.unlock;
    this.locked = null;
    this.unlock = null;
    unlock?.();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.lock();
    return new GroupConnection(this);
  }

  /** Opens the physical transaction (when none is) and returns it; its COMMIT runs after this turn's I/O callbacks. */
  join(): Group {
    if (this.group) return this.group;
    this.run('begin');
    let resolve!: () => void;
    let reject!: (error: unknown) => void;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // Awaited by every member; this keeps a failure that nobody awaits yet from being an unhandled rejection.
    done.catch(() => undefined);
    const group = (this.group = { done, resolve, reject });
    setImmediate(() => void this.commit(group));
    return group;
  }

  private async commit(group: Group): Promise<void> {
    await this.lock();
    try {
      this.run('commit');
      group.resolve();
    } catch (error) {
      try {
        this.run('rollback');
      } catch {
        // SQLite rolled it back itself.
      }
      group.reject(error);
    } finally {
      this.group = null;
      this.release();
    }
  }

  /** Statements by SQL text through the statement cache; `run` for those that return no rows. */
  query(sql: string, parameters: readonly unknown[]): QueryResult<unknown> {
    const statement = this.database.prepare(sql);
    if (statement.reader) return { rows: statement.all(parameters) as unknown[] };
    const { changes, lastInsertRowid } = statement.run(parameters);
    return {
      numAffectedRows: changes !== undefined && changes !== null ? BigInt(changes) : undefined,
      insertId: lastInsertRowid !== undefined && lastInsertRowid !== null ? BigInt(lastInsertRowid) : undefined,
      rows: [],
    };
  }

  private run(sql: string): void {
    this.database.prepare(sql).run([]);
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    (connection as GroupConnection).member = this.join();
    this.run(`savepoint ${SAVEPOINT}`);
  }

  async commitTransaction(): Promise<void> {
    this.run(`release ${SAVEPOINT}`);
  }

  async rollbackTransaction(): Promise<void> {
    this.run(`rollback to ${SAVEPOINT}`);
    this.run(`release ${SAVEPOINT}`);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    const { member } = connection as GroupConnection;
    this.release();
    // Answered only once the physical transaction it took part in is committed.
    if (member) await member.done;
  }

  async destroy(): Promise<void> {
    const open = this.group;
    if (open) await open.done.catch(() => undefined);
    this.database.close();
  }
}

class GroupConnection implements DatabaseConnection {
  /** The physical transaction this acquisition ran in (it waits for its COMMIT on release). */
  member: Group | null = null;

  constructor(private readonly driver: GroupCommitDriver) {}

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    // Outside a store transaction: a write joins (or opens) the physical transaction; so does anything while one is open.
    if (this.member === null && (this.driver.hasGroup() || WRITE.test(compiled.sql))) this.member = this.driver.join();
    return this.driver.query(compiled.sql, compiled.parameters) as QueryResult<R>;
  }

  // eslint-disable-next-line require-yield
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('the store does not stream SQLite results');
  }
}
