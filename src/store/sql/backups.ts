/** BackupStore on SQL: backup records, their creation under the cadence and quota rules, compare-and-set changes. */
import { type Compilable, CompiledQuery, type Kysely, type Selectable } from 'kysely';
import { IN_FLIGHT_STATUSES, type BackupStatus, type CreateDecision, type CreateSnapshot } from '../../domain/backups.js';
import type { Backup } from '../../domain/entities.js';
import type { BackupCondition, BackupPatch, BackupStore } from '../ports/backups.js';
import type { BackupsTable, Database as Schema } from '../schema.js';
import type { SqlContext } from './context.js';
import { num, numOrNull } from './rows.js';

function toBackup(row: Selectable<BackupsTable>): Backup {
  return {
    id: row.id,
    accountId: row.account_id,
    status: row.status as BackupStatus,
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    updatedAt: num(row.updated_at),
    blobPath: row.blob_path,
    blobKey: row.blob_key,
    ciphertextSizeBytes: numOrNull(row.ciphertext_size_bytes),
    plaintextSizeBytes: numOrNull(row.plaintext_size_bytes),
    clientVersion: row.client_version,
    hostappVersion: row.hostapp_version,
    cryptoVersion: 'v1',
    wrappedDek: row.wrapped_dek,
    wrappedDekNonce: row.wrapped_dek_nonce,
    encryptedMetadata: row.encrypted_metadata,
    encryptedMetadataNonce: row.encrypted_metadata_nonce,
    deletedAt: numOrNull(row.deleted_at),
    purgeAfter: numOrNull(row.purge_after),
    lockedUntil: numOrNull(row.locked_until),
    blobVersion: row.blob_version,
  };
}

const BACKUP_COLUMNS: Record<keyof BackupPatch, keyof BackupsTable> = {
  status: 'status',
  expiresAt: 'expires_at',
  updatedAt: 'updated_at',
  blobKey: 'blob_key',
  ciphertextSizeBytes: 'ciphertext_size_bytes',
  plaintextSizeBytes: 'plaintext_size_bytes',
  clientVersion: 'client_version',
  hostappVersion: 'hostapp_version',
  cryptoVersion: 'crypto_version',
  wrappedDek: 'wrapped_dek',
  wrappedDekNonce: 'wrapped_dek_nonce',
  encryptedMetadata: 'encrypted_metadata',
  encryptedMetadataNonce: 'encrypted_metadata_nonce',
  deletedAt: 'deleted_at',
  purgeAfter: 'purge_after',
  lockedUntil: 'locked_until',
  blobVersion: 'blob_version',
};

function backupPatchRow(patch: BackupPatch): Partial<BackupsTable> {
  const row: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(patch)) {
    if (value !== undefined) row[BACKUP_COLUMNS[key as keyof BackupPatch]] = value;
  }
  return row as Partial<BackupsTable>;
}

function backupRow(backup: Backup): BackupsTable {
  const { id, accountId, createdAt, blobPath, ...rest } = backup;
  return {
    id,
    account_id: accountId,
    created_at: createdAt,
    blob_path: blobPath,
    ...(backupPatchRow(rest) as Omit<BackupsTable, 'id' | 'account_id' | 'created_at' | 'blob_path'>),
  };
}

export class SqlBackupStore implements BackupStore {
  constructor(private readonly ctx: SqlContext) {}

  async createBackup(
    accountId: string,
    now: number,
    decide: (snapshot: CreateSnapshot) => CreateDecision,
    backup: Backup,
  ): Promise<CreateDecision> {
    return this.ctx.transaction(async (trx) => {
      // Writing the account row first takes the write lock (SQLite) or the row lock (PostgreSQL), so
      // concurrent creates for one account run one after another and see each other's slot.
      const account = await this.ctx.lockAccount(trx, accountId);
      const [vault] = await this.ctx.cached(trx, 'reads', 'createBackup/vault', [accountId], (db) =>
        db.selectFrom('vaults').select('account_id').where('account_id', '=', accountId),
      );
      const [inFlight] = await this.ctx.cached(
        trx,
        'reads',
        `createBackup/inFlight/${IN_FLIGHT_STATUSES.length}`,
        [accountId, ...IN_FLIGHT_STATUSES, now],
        (db) =>
          db
            .selectFrom('backups')
            .select('id')
            .where('account_id', '=', accountId)
            .where('status', 'in', IN_FLIGHT_STATUSES)
            .where('expires_at', '>', now)
            .orderBy('created_at', 'desc'),
      );
      const decision = decide({
        plan: account.plan,
        vaultInitialized: vault !== undefined,
        inFlightBackupId: inFlight?.id ?? null,
        lastReadyCreatedAt: account.lastReadyCreatedAt,
      });
      if (decision.allowed) {
        const row = backupRow(backup);
        const columns = Object.keys(row);
        await this.ctx.cached(trx, 'writes', `insertBackup/${columns.join(',')}`, Object.values(row), (db) =>
          db.insertInto('backups').values(row),
        );
      }
      return decision;
    });
  }

  async getBackup(id: string): Promise<Backup | undefined> {
    const [row] = await this.ctx.read('getBackup', [id], (db) => db.selectFrom('backups').selectAll().where('id', '=', id));
    return row && toBackup(row);
  }

  async listBackups(accountId: string, statuses: readonly BackupStatus[]): Promise<Backup[]> {
    if (statuses.length === 0) return [];
    const rows = await this.ctx.read(`listBackups/${statuses.length}`, [accountId, ...statuses], (db) =>
      db
        .selectFrom('backups')
        .selectAll()
        .where('account_id', '=', accountId)
        .where('status', 'in', statuses)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc'),
    );
    return rows.map(toBackup);
  }

  updateBackup(
    id: string,
    condition: BackupCondition,
    patch: BackupPatch,
    releaseUpload?: string,
    forgetOpenUpload?: string,
  ): Promise<Backup | undefined> {
    if (releaseUpload === undefined && forgetOpenUpload === undefined) return this.conditionalUpdate(this.ctx.db, id, condition, patch);
    // PostgreSQL: one statement (the deletes as WITH parts of the update: atomic without BEGIN/COMMIT; bench P8).
    if (this.ctx.kind === 'postgres') return this.conditionalUpdate(this.ctx.db, id, condition, patch, { releaseUpload, forgetOpenUpload });
    // One commit for all (SQLite: one WAL fsync on the event loop instead of two; bench P8).
    return this.ctx.transaction(async (trx) => {
      const backup = await this.conditionalUpdate(trx, id, condition, patch);
      if (releaseUpload !== undefined) await this.ctx.deleteReservation(trx, releaseUpload);
      if (forgetOpenUpload !== undefined) await this.ctx.deleteOpenUpload(trx, forgetOpenUpload);
      return backup;
    });
  }

  markReady(id: string, condition: BackupCondition, patch: BackupPatch): Promise<Backup | undefined> {
    // PostgreSQL: one statement, the account's update a WITH part reading the updated record (bench P8).
    if (this.ctx.kind === 'postgres') {
      return this.conditionalUpdate(this.ctx.db, id, condition, { ...patch, status: 'READY' }, { lastReady: true });
    }
    return this.ctx.transaction(async (trx) => {
      const backup = await this.conditionalUpdate(trx, id, condition, { ...patch, status: 'READY' });
      if (backup) {
        const { accountId, createdAt } = backup;
        await this.ctx.cached(trx, 'writes', 'markReady/account', [createdAt, accountId, createdAt], (db) =>
          db
            .updateTable('accounts')
            .set({ last_ready_created_at: createdAt })
            .where('id', '=', accountId)
            .where((eb) => eb.or([eb('last_ready_created_at', 'is', null), eb('last_ready_created_at', '<', createdAt)])),
        );
      }
      return backup;
    });
  }

  private async conditionalUpdate(
    db: Kysely<Schema>,
    id: string,
    condition: BackupCondition,
    patch: BackupPatch,
    ends?: { releaseUpload?: string | undefined; forgetOpenUpload?: string | undefined; lastReady?: boolean },
  ): Promise<Backup | undefined> {
    const set = backupPatchRow(patch);
    const { statuses, ciphertextSizeBytes, scheduled } = condition;
    const parameters: unknown[] = [...Object.values(set), id, ...statuses];
    let key = `conditionalUpdate/${Object.keys(set).join(',')}/${statuses.length}`;
    if (ciphertextSizeBytes !== undefined) {
      key += '/size';
      parameters.push(ciphertextSizeBytes);
    }
    if (scheduled !== undefined) {
      key += `/scheduled${scheduled.dueAfter === undefined ? '' : '>'}${scheduled.dueBy === undefined ? '' : '<='}`;
      if (scheduled.dueAfter !== undefined) parameters.push(scheduled.dueAfter);
      if (scheduled.dueBy !== undefined) parameters.push(scheduled.dueBy);
    }
    // PostgreSQL only (SQLite has no DELETE in a WITH): the upload reservation (and those grouped under it, as
    // SqlContext.deleteReservation) ends and the open upload (SqlContext.deleteOpenUpload) is forgotten in the
    // update's own statement, whether or not the update applies. Their parameters follow the update's.
    const cte: string[] = [];
    const extra: unknown[] = [];
    const at = () => `$${parameters.length + extra.length + 1}`;
    if (ends?.releaseUpload !== undefined) {
      key += '/releaseUpload';
      const id = at();
      extra.push(ends.releaseUpload);
      const group = at();
      extra.push(`${ends.releaseUpload}.%`);
      cte.push(`ended_reservations as (delete from upload_reservations where id = ${id} or id like ${group})`);
    }
    if (ends?.forgetOpenUpload !== undefined) {
      key += '/forgetOpenUpload';
      const upload = at();
      extra.push(ends.forgetOpenUpload);
      cte.push(`forgotten_parts as (delete from blobhost_parts where upload_id = ${upload})`);
      cte.push(`forgotten_uploads as (delete from blobhost_uploads where upload_id = ${upload})`);
    }
    const build = (db: Kysely<Schema>) => {
      let query = db.updateTable('backups').set(set).where('id', '=', id).where('status', 'in', statuses);
      if (ciphertextSizeBytes !== undefined) query = query.where('ciphertext_size_bytes', '=', ciphertextSizeBytes);
      if (scheduled !== undefined) {
        const { dueAfter, dueBy } = scheduled;
        query = query.where('purge_after', 'is not', null);
        if (dueAfter !== undefined) query = query.where('purge_after', '>', dueAfter);
        if (dueBy !== undefined) query = query.where('purge_after', '<=', dueBy);
      }
      return query.returningAll();
    };
    if (ends?.lastReady === true) key += '/lastReady';
    const [row] = await this.ctx.cached(db, 'writes', key, [...parameters, ...extra], (db) => {
      // The account's last READY (markReady), from the updated record: no row updated, no change to the account.
      if (ends?.lastReady === true) return wrapped(build(db), 'with ready as (', LAST_READY);
      return cte.length === 0 ? build(db) : wrapped(build(db), `with ${cte.join(', ')} `, '', extra);
    });
    return row && toBackup(row);
  }

  async listSweepCandidates(now: number, accountId?: string): Promise<Backup[]> {
    let query = this.ctx.db
      .selectFrom('backups')
      .selectAll()
      .where((eb) =>
        eb.or([
          eb.and([eb('status', 'in', IN_FLIGHT_STATUSES), eb('expires_at', '<=', now)]),
          eb.and([eb('status', '=', 'READY'), eb('expires_at', '<=', now)]),
          eb('status', '=', 'FAILED'),
          // A delete under way (crash recovery), or one whose grace has ended.
          eb.and([eb('status', '=', 'DELETING'), eb.or([eb('purge_after', 'is', null), eb('purge_after', '<=', now)])]),
          // An object kept for its Object Lock, whose lock has ended.
          eb.and([eb('status', '=', 'DELETED'), eb('locked_until', 'is not', null), eb('locked_until', '<=', now)]),
        ]),
      );
    if (accountId !== undefined) query = query.where('account_id', '=', accountId);
    const rows = await query.orderBy('created_at').limit(500).execute();
    return rows.map(toBackup);
  }

  async liveBlobKeys(blobKeys: readonly string[]): Promise<Set<string>> {
    const live = new Set<string>();
    for (let i = 0; i < blobKeys.length; i += 500) {
      const rows = await this.ctx.db
        .selectFrom('backups')
        .select('blob_key')
        .where('blob_key', 'in', blobKeys.slice(i, i + 500))
        .where((eb) => eb.or([eb('status', '!=', 'DELETED'), eb('locked_until', 'is not', null)]))
        .execute();
      for (const row of rows) if (row.blob_key !== null) live.add(row.blob_key);
    }
    return live;
  }
}

/** markReady's account update on PostgreSQL, after `with ready as (<the record's update>`. */
const LAST_READY =
  '), last_ready as (update accounts set last_ready_created_at = ready.created_at from ready where accounts.id = ready.account_id' +
  ' and (accounts.last_ready_created_at is null or accounts.last_ready_created_at < ready.created_at)) select * from ready';

/**
 * `query` between `prefix` and `suffix` (SQL naming its own placeholders, numbered after the query's), with `extra`
 * bound after the query's parameters.
 */
function wrapped<R>(query: Compilable<R>, prefix: string, suffix: string, extra: unknown[] = []): Compilable<R> {
  return {
    compile: () => {
      const compiled = query.compile();
      return CompiledQuery.raw(prefix + compiled.sql + suffix, [...compiled.parameters, ...extra]) as CompiledQuery<R>;
    },
  };
}
