/** The database itself, whatever the aggregates: opening, migrations, probes, counters and cross-node locks. */

/** Statements a store has sent since it was opened (monotonic; a benchmark or /metrics reads the deltas). */
export interface QueryCounts {
  reads: number;
  writes: number;
  other: number;
}

export interface Database {
  readonly kind: 'sqlite' | 'postgres';
  /** A snapshot of the statement counters (SELECT = read; INSERT/UPDATE/DELETE = write; anything else = other). */
  queryCounts(): QueryCounts;
  /**
   * A number that moves whenever another connection to the database commits (SQLite's `PRAGMA data_version`: a
   * `coffer admin` process); absent where changes made elsewhere are announced instead (PostgreSQL: NOTIFY).
   */
  changeVersion?(): number;
  migrate(): Promise<void>;
  close(): Promise<void>;
  /** Reachability probe for readiness checks. */
  ping(): Promise<void>;

  /** Names of the schema migrations applied to this database, in order. */
  appliedMigrations(): Promise<string[]>;

  /**
   * Runs `task` only if no other holder of the lock `name` is running one: across every node for PostgreSQL
   * (an advisory lock), within this process for SQLite (an embedded, single-node database).
   */
  tryExclusive<T>(name: string, task: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }>;
}
