/**
 * The one choice of SQLite driver (docs/runtime.md): Node's built-in `node:sqlite` wherever the runtime has a
 * complete one, better-sqlite3 (an optional dependency, loaded only when needed) where it does not (Node 20).
 * Both are served through the same small synchronous interface, so the store, the snapshot command, the tests
 * and the benchmarks never name a driver themselves.
 */
import { createRequire } from 'node:module';

export type SqliteDriverName = 'node' | 'better-sqlite3';
export const SQLITE_DRIVERS: readonly SqliteDriverName[] = ['node', 'better-sqlite3'];

/** One prepared statement; parameters are positional, given as one array (the shape Kysely's SqliteDialect uses). */
export interface SqliteQuery {
  /** The statement returns rows (a SELECT, or a write with RETURNING). */
  readonly reader: boolean;
  all(parameters: readonly unknown[]): unknown[];
  get(parameters: readonly unknown[]): unknown;
  run(parameters: readonly unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  iterate(parameters: readonly unknown[]): IterableIterator<unknown>;
}

/** An open database, synchronous like both drivers. Rows are plain objects; BLOBs are Buffers. */
export interface SqliteConnection {
  readonly driver: SqliteDriverName;
  prepare(sql: string): SqliteQuery;
  exec(sql: string): void;
  close(): void;
}

export interface SqliteOpenOptions {
  /** Opens an existing file without write access; a missing file is an error. */
  readonly?: boolean;
  /** A driver named by COFFER_SQLITE_DRIVER; null: the best one this runtime has. */
  driver?: SqliteDriverName | null;
}

// ---- node:sqlite (the part of its API used here; @types/node of the oldest supported Node has none) ----

interface NodeStatement {
  columns(): unknown[];
  all(...parameters: unknown[]): unknown[];
  get(...parameters: unknown[]): unknown;
  run(...parameters: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  iterate(...parameters: unknown[]): IterableIterator<unknown>;
}
interface NodeDatabase {
  prepare(sql: string): NodeStatement;
  exec(sql: string): void;
  close(): void;
}
interface NodeSqliteModule {
  DatabaseSync: new (file: string, options?: { readOnly?: boolean }) => NodeDatabase;
  StatementSync: { prototype: Partial<NodeStatement> };
}

let nodeSqlite: NodeSqliteModule | null | undefined;

/**
 * node:sqlite when this runtime has it with `StatementSync.columns()` (22.16 and later): a capability check,
 * not a version number. Node 22 announces the module with an ExperimentalWarning on stderr; that one warning
 * (and no other) is kept from the CLI's and the server's output.
 */
function loadNodeSqlite(): NodeSqliteModule | null {
  if (nodeSqlite !== undefined) return nodeSqlite;
  const emitWarning = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]): void {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const message = typeof warning === 'string' ? warning : warning.message;
    if (type === 'ExperimentalWarning' && message.startsWith('SQLite is an experimental feature')) return;
    return (emitWarning as (...args: unknown[]) => void).call(process, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    const module = process.getBuiltinModule?.('node:sqlite') as NodeSqliteModule | undefined;
    nodeSqlite = typeof module?.StatementSync?.prototype?.columns === 'function' ? module : null;
  } finally {
    process.emitWarning = emitWarning;
  }
  return nodeSqlite;
}

/** node:sqlite rows have a null prototype and BLOBs as Uint8Array; better-sqlite3's are plain objects and Buffers. */
function plainRow(row: unknown): unknown {
  if (row === undefined || row === null) return row;
  const plain: Record<string, unknown> = {};
  for (const key in row as Record<string, unknown>) {
    const value = (row as Record<string, unknown>)[key];
    plain[key] = value instanceof Uint8Array ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : value;
  }
  return plain;
}

function* plainRows(rows: IterableIterator<unknown>): IterableIterator<unknown> {
  for (const row of rows) yield plainRow(row);
}

function openNode(module: NodeSqliteModule, file: string, readonly: boolean): SqliteConnection {
  const database = new module.DatabaseSync(file, { readOnly: readonly });
  return {
    driver: 'node',
    prepare(sql) {
      const statement = database.prepare(sql);
      return {
        reader: statement.columns().length > 0,
        all: (parameters) => statement.all(...parameters).map(plainRow),
        get: (parameters) => plainRow(statement.get(...parameters)),
        run: (parameters) => statement.run(...parameters),
        iterate: (parameters) => plainRows(statement.iterate(...parameters)),
      };
    },
    exec: (sql) => database.exec(sql),
    close: () => database.close(),
  };
}

// ---- better-sqlite3 ----

type BetterSqlite3 = typeof import('better-sqlite3');
let betterSqlite: Promise<BetterSqlite3 | string> | undefined;

/**
 * better-sqlite3 12 aborts the process on Node 24 and later (`Statement::~Statement()` assertion after a few
 * thousand statements; 13 fixes that but crashes on Node 20). Those runtimes have node:sqlite, so 12 is never
 * loaded there, even when it happens to be installed and compiled.
 */
function knownBroken(version: string): boolean {
  return Number(version.split('.')[0]) < 13 && Number(process.versions.node.split('.')[0]) >= 24;
}

/** The module when it is installed, safe here and its native part loads; else why not. */
function loadBetterSqlite(): Promise<BetterSqlite3 | string> {
  betterSqlite ??= (async () => {
    let version: string;
    try {
      version = (createRequire(import.meta.url)('better-sqlite3/package.json') as { version: string }).version;
    } catch {
      return 'better-sqlite3 is not installed';
    }
    if (knownBroken(version)) return `better-sqlite3 ${version} crashes on Node ${process.versions.node}`;
    try {
      const module = (await import('better-sqlite3')).default;
      new module(':memory:').close(); // loads the native part: a build for another Node fails here, not later
      return module;
    } catch (error) {
      return `better-sqlite3 ${version} does not load: ${(error as Error).message.replace(/\s+/g, ' ')}`;
    }
  })();
  return betterSqlite;
}

function openBetter(module: BetterSqlite3, file: string, readonly: boolean): SqliteConnection {
  const database = new module(file, { readonly, fileMustExist: readonly });
  return {
    driver: 'better-sqlite3',
    prepare: (sql) => database.prepare(sql) as unknown as SqliteQuery,
    exec: (sql) => void database.exec(sql),
    close: () => void database.close(),
  };
}

// ---- the choice ----

const nodeMissing = () => `Node ${process.versions.node} has no node:sqlite with StatementSync.columns() (22.16 or later)`;

/** The drivers that work on this runtime, preferred first; with the reason for each that does not. */
export async function sqliteDrivers(): Promise<{ available: SqliteDriverName[]; unavailable: Map<SqliteDriverName, string> }> {
  const available: SqliteDriverName[] = [];
  const unavailable = new Map<SqliteDriverName, string>();
  if (loadNodeSqlite()) available.push('node');
  else unavailable.set('node', nodeMissing());
  const better = await loadBetterSqlite();
  if (typeof better === 'string') unavailable.set('better-sqlite3', better);
  else available.push('better-sqlite3');
  return { available, unavailable };
}

/**
 * Opens `file` with the driver named, or the best one here: node:sqlite if complete, else better-sqlite3.
 * better-sqlite3 is imported only when it is the one used. Neither available: one error line saying why.
 */
export async function openSqliteDatabase(file: string, options: SqliteOpenOptions = {}): Promise<SqliteConnection> {
  const readonly = options.readonly ?? false;
  const wanted = options.driver ?? null;
  if (wanted !== 'better-sqlite3') {
    const module = loadNodeSqlite();
    if (module) return openNode(module, file, readonly);
    if (wanted === 'node') {
      throw new Error(`COFFER_SQLITE_DRIVER=node: ${nodeMissing()}`);
    }
  }
  const better = await loadBetterSqlite();
  if (typeof better !== 'string') return openBetter(better, file, readonly);
  throw new Error(
    wanted === 'better-sqlite3' ? `COFFER_SQLITE_DRIVER=better-sqlite3: ${better}` : `no SQLite driver: ${nodeMissing()}, and ${better}`,
  );
}
