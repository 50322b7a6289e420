/**
 * What every SQL port shares: the Kysely handle (counted), the statement counter, the compiled-statement cache of
 * the hot statements, transactions, and the row locks several aggregates take (the account's, its fleet owner's).
 * SQLite and PostgreSQL differ only in how the Kysely instance is built (src/store/sqlite.ts, src/store/postgres.ts).
 */
import {
  type Compilable,
  CompiledQuery,
  type Kysely,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RawBuilder,
  type RootOperationNode,
  type Transaction,
  type UnknownRow,
  sql,
} from 'kysely';
import type { Account } from '../../domain/entities.js';
import type { QueryCounts } from '../ports/database.js';
import type { Database as Schema } from '../schema.js';
import { toAccount } from './accounts.js';

/** Counts every statement the store sends (SELECT = read; INSERT/UPDATE/DELETE = write; anything else = other). */
class QueryCounter implements KyselyPlugin {
  readonly counts: QueryCounts = { reads: 0, writes: 0, other: 0 };

  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    switch (node.kind) {
      case 'SelectQueryNode':
        this.counts.reads += 1;
        break;
      case 'InsertQueryNode':
      case 'UpdateQueryNode':
      case 'DeleteQueryNode':
      case 'MergeQueryNode':
        this.counts.writes += 1;
        break;
      default:
        this.counts.other += 1;
    }
    return node;
  }

  transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return Promise.resolve(result);
  }
}

/** One database as every port of it sees it (one per opened database, shared by its ports). */
export class SqlContext {
  private readonly counter = new QueryCounter();
  /** The counted handle every port runs its statements on. */
  readonly db: Kysely<Schema>;
  /** SQL text of the hot statements, compiled once (see read()). */
  private readonly compiled = new Map<string, string>();

  constructor(
    readonly kind: 'sqlite' | 'postgres',
    private readonly uncounted: Kysely<Schema>,
  ) {
    this.db = uncounted.withPlugin(this.counter);
  }

  /** A snapshot of the statement counters. */
  queryCounts(): QueryCounts {
    return { ...this.counter.counts };
  }

  /** Runs `work` in one transaction (one commit), on this database. */
  transaction<T>(work: (trx: Transaction<Schema>) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(work);
  }

  /**
   * The reads every request makes (API key, account, vault, backup, list) skip Kysely's query builder and
   * compiler after their first use: building and compiling cost ~20 µs per query, as much as SQLite's own
   * work (bench P3). The first call compiles with the real values and checks that the parameters come out
   * in the order given, so the cached SQL text is always run with the right bindings.
   */
  read<R>(key: string, parameters: unknown[], build: (db: Kysely<Schema>) => Compilable<R>): Promise<R[]> {
    return this.cached(this.db, 'reads', key, parameters, build);
  }

  /**
   * The same for the statements of the backup cycle's writes (bench P8), run on `db` (the store's, or a transaction).
   * `key` must name everything that shapes the SQL text (the columns set, the length of an IN list, the conditions).
   */
  async cached<R>(
    db: Kysely<Schema>,
    kind: 'reads' | 'writes',
    key: string,
    parameters: unknown[],
    build: (db: Kysely<Schema>) => Compilable<R>,
  ): Promise<R[]> {
    let text = this.compiled.get(key);
    if (text === undefined) {
      const query = build(this.uncounted).compile();
      if (query.parameters.length !== parameters.length || query.parameters.some((p, i) => p !== parameters[i])) {
        throw new Error(`${key}: compiled parameters are not in the given order`);
      }
      text = query.sql;
      this.compiled.set(key, text);
    }
    this.counter.counts[kind] += 1;
    return (await db.executeQuery<R>(CompiledQuery.raw(text, parameters))).rows;
  }

  /** Locks the row of the fleet's owner (the account itself when it is not a host account) and returns it. */
  async lockFleet(trx: Transaction<Schema>, accountId: string): Promise<Account> {
    // One statement, so the first thing the transaction does is a write (SQLite: the write lock at once).
    const [row] = await this.cached(trx, 'writes', 'lockFleet', [accountId], (db) =>
      db
        .updateTable('accounts')
        .set({ plan: sql`plan` })
        .where('id', '=', (eb) =>
          eb
            .selectFrom('accounts as member')
            .select(sql<string>`coalesce(member.owner_account_id, member.id)`.as('root'))
            .where('member.id', '=', accountId),
        )
        .returningAll(),
    );
    if (!row) throw new Error(`account ${accountId} does not exist`);
    return toAccount(row);
  }

  /** Locks the account's row (SQLite: the write lock; PostgreSQL: the row lock) and returns it. */
  async lockAccount(trx: Transaction<Schema>, accountId: string): Promise<Account> {
    const [row] = await this.cached(trx, 'writes', 'lockAccount', [accountId], (db) =>
      db
        .updateTable('accounts')
        .set({ plan: sql`plan` })
        .where('id', '=', accountId)
        .returningAll(),
    );
    if (!row) throw new Error(`account ${accountId} does not exist`);
    return toAccount(row);
  }

  /**
   * Ends an upload reservation and the reservations grouped under it (ids `<id>.<anything>`: a presigned multipart
   * upload's per-part reservations), on `db` (the store's, or the transaction of the change that ends it).
   */
  /**
   * Forgets an open upload of the multipart port and its parts' sizes (completed, aborted or refused), on `db` (the
   * store's, or the transaction of the change that ends it). PostgreSQL: one statement; SQLite (no DELETE in a WITH):
   * two, in `db`'s transaction when it is one.
   */
  async deleteOpenUpload(db: Kysely<Schema>, uploadId: string): Promise<void> {
    if (this.kind === 'postgres') {
      await this.cached(db, 'writes', 'deleteOpenUpload', [uploadId, uploadId], (db) =>
        precompiled(
          db,
          sql`with parts as (delete from blobhost_parts where upload_id = ${uploadId}) delete from blobhost_uploads where upload_id = ${uploadId}`,
        ),
      );
      return;
    }
    await this.cached(db, 'writes', 'deleteOpenUpload/parts', [uploadId], (db) =>
      db.deleteFrom('blobhost_parts').where('upload_id', '=', uploadId),
    );
    await this.cached(db, 'writes', 'deleteOpenUpload/upload', [uploadId], (db) =>
      db.deleteFrom('blobhost_uploads').where('upload_id', '=', uploadId),
    );
  }

  deleteReservation(db: Kysely<Schema>, id: string): Promise<unknown[]> {
    const group = `${id}.%`;
    return this.cached(db, 'writes', 'deleteReservation', [id, group], (db) =>
      db.deleteFrom('upload_reservations').where((eb) => eb.or([eb('id', '=', id), eb('id', 'like', group)])),
    );
  }
}

/** A raw statement as a Compilable on `db`'s dialect (for SqlContext.cached). */
export function precompiled<R>(db: Kysely<Schema>, statement: RawBuilder<R>): Compilable<R> {
  return { compile: () => statement.compile(db) };
}
