/** UsageStore on SQL: what accounts and fleets store, and the upload reservations that count against their quota. */
import { type ExpressionBuilder, type Kysely, type RawBuilder, sql } from 'kysely';
import type { Account } from '../../domain/entities.js';
import type {
  AccountSafetyRow,
  AccountUsageRow,
  DrillResult,
  FleetUsage,
  LockedBackupRow,
  ReserveResult,
  UploadReservation,
  UsageStore,
} from '../ports/usage.js';
import type { AccountsTable, Database as Schema } from '../schema.js';
import { toAccount } from './accounts.js';
import type { SqlContext } from './context.js';

/** Backups whose ciphertext counts as stored: READY, UPLOADED (not yet finalized), DELETING in its grace. */
const STORED = sql<boolean>`(status in ('READY', 'UPLOADED') or (status = 'DELETING' and purge_after is not null))`;

/** A stored result as the drill reported it; anything else (never written by the API) reads as failed, not as passed. */
const drillResult = (value: string | null | undefined): DrillResult | null =>
  value === null || value === undefined ? null : value === 'passed' ? 'passed' : 'failed';

export class SqlUsageStore implements UsageStore {
  constructor(private readonly ctx: SqlContext) {}

  async usage(now: number, accountId?: string, since?: number): Promise<AccountUsageRow[]> {
    const count = (eb: ExpressionBuilder<Schema & { a: AccountsTable }, 'a'>, where: RawBuilder<boolean>, alias: string) =>
      eb
        .selectFrom('backups')
        .select(sql<string | number>`count(*)`.as('c'))
        .whereRef('backups.account_id', '=', 'a.id')
        .where(where)
        .as(alias);
    let query = this.ctx.db
      .selectFrom('accounts as a')
      .selectAll('a')
      .select((eb) => [
        eb
          .selectFrom('backups')
          .select(sql<string | number>`coalesce(sum(ciphertext_size_bytes), 0)`.as('s'))
          .whereRef('backups.account_id', '=', 'a.id')
          .where(STORED)
          .as('stored'),
        eb
          .selectFrom('upload_reservations')
          .select(sql<string | number>`coalesce(sum(bytes), 0)`.as('r'))
          .whereRef('upload_reservations.account_id', '=', 'a.id')
          .where('upload_reservations.expires_at', '>', now)
          .as('reserved'),
        count(eb, sql<boolean>`status = 'READY'`, 'ready'),
        count(eb, sql<boolean>`(status = 'DELETING' and purge_after is not null)`, 'grace'),
        count(eb, sql<boolean>`status in ('PENDING_UPLOAD', 'UPLOADED')`, 'uploading'),
        count(
          eb,
          since === undefined ? sql<boolean>`1 = 0` : sql<boolean>`(status in ('READY', 'DELETING') and created_at >= ${since})`,
          'recent',
        ),
      ])
      .orderBy('a.created_at')
      .orderBy('a.id');
    if (accountId !== undefined) query = query.where('a.id', '=', accountId);
    const rows = await query.execute();
    return rows.map((row) => {
      const account = toAccount(row);
      return {
        accountId: account.id,
        ownerAccountId: account.ownerAccountId ?? null,
        hostLabel: account.ownerAccountId ? (account.label ?? null) : null,
        plan: account.plan,
        createdAt: account.createdAt,
        ...('quotaOverride' in account ? { quotaOverride: account.quotaOverride } : {}),
        storedBytes: Number(row.stored ?? 0) + Number(row.reserved ?? 0),
        backups: Number(row.ready ?? 0),
        graceBackups: Number(row.grace ?? 0),
        uploadingBackups: Number(row.uploading ?? 0),
        createdSince: Number(row.recent ?? 0),
        lastReadyAt: account.lastReadyCreatedAt,
      };
    });
  }

  async safety(now: number, accountId?: string): Promise<AccountSafetyRow[]> {
    const locked = (
      eb: ExpressionBuilder<Schema & { a: AccountsTable }, 'a'>,
      what: RawBuilder<string | number | null>,
      where: RawBuilder<boolean>,
    ) =>
      eb
        .selectFrom('backups')
        .select(what.as('v'))
        .whereRef('backups.account_id', '=', 'a.id')
        .where('backups.locked_until', '>', now)
        .where(where);
    let query = this.ctx.db
      .selectFrom('accounts as a')
      .select('a.id')
      .select((eb) => [
        eb
          .selectFrom('restore_attestations as r')
          .select('r.recorded_at')
          .whereRef('r.account_id', '=', 'a.id')
          .orderBy('r.recorded_at', 'desc')
          .orderBy('r.id', 'desc')
          .limit(1)
          .as('drill_at'),
        eb
          .selectFrom('restore_attestations as r')
          .select('r.result')
          .whereRef('r.account_id', '=', 'a.id')
          .orderBy('r.recorded_at', 'desc')
          .orderBy('r.id', 'desc')
          .limit(1)
          .as('drill_result'),
        locked(eb, sql`count(*)`, sql<boolean>`status <> 'DELETED'`).as('locked'),
        locked(eb, sql`count(*)`, sql<boolean>`status = 'DELETED'`).as('locked_deleted'),
        locked(eb, sql`coalesce(sum(ciphertext_size_bytes), 0)`, sql<boolean>`1 = 1`).as('locked_bytes'),
        locked(eb, sql`max(locked_until)`, sql<boolean>`1 = 1`).as('locked_until'),
      ])
      .orderBy('a.created_at')
      .orderBy('a.id');
    if (accountId !== undefined) query = query.where('a.id', '=', accountId);
    return (await query.execute()).map((row) => ({
      accountId: row.id,
      lastDrillAt: row.drill_at === null ? null : Number(row.drill_at),
      lastDrillResult: drillResult(row.drill_result),
      lockedBackups: Number(row.locked ?? 0),
      lockedDeletedBackups: Number(row.locked_deleted ?? 0),
      lockedBytes: Number(row.locked_bytes ?? 0),
      lockedUntil: row.locked_until === null ? null : Number(row.locked_until),
    }));
  }

  async lockedBackups(now: number, accountId?: string): Promise<LockedBackupRow[]> {
    let query = this.ctx.db
      .selectFrom('backups')
      .select(['id', 'account_id', 'status', 'ciphertext_size_bytes', 'locked_until'])
      .where('locked_until', '>', now)
      .orderBy('locked_until', 'desc')
      .orderBy('id');
    if (accountId !== undefined) query = query.where('account_id', '=', accountId);
    return (await query.execute()).map((row) => ({
      backupId: row.id,
      accountId: row.account_id,
      status: row.status,
      ciphertextSizeBytes: row.ciphertext_size_bytes === null ? null : Number(row.ciphertext_size_bytes),
      lockedUntil: Number(row.locked_until),
    }));
  }

  async fleetUsage(now: number, accountId: string): Promise<FleetUsage | undefined> {
    const [row] = await this.ctx.db
      .selectFrom('accounts')
      .selectAll()
      .where('id', '=', (eb) =>
        eb
          .selectFrom('accounts')
          .select(sql<string>`coalesce(owner_account_id, id)`.as('root'))
          .where('id', '=', accountId),
      )
      .execute();
    if (!row) return undefined;
    const members = await this.ctx.db
      .selectFrom('accounts')
      .select(sql<string | number>`count(*)`.as('c'))
      .where((w) => w.or([w('id', '=', row.id), w('owner_account_id', '=', row.id)]))
      .executeTakeFirstOrThrow();
    return { owner: toAccount(row), storedBytes: await this.fleetStored(this.ctx.db, row.id, now), accounts: Number(members.c) };
  }

  /** What the fleet of `ownerId` (the owner and its host accounts) stores at `now`, reservations included. */
  private async fleetStored(db: Kysely<Schema>, ownerId: string, now: number): Promise<number> {
    const fleet = (eb: ExpressionBuilder<Schema, 'backups' | 'upload_reservations'>) =>
      eb
        .selectFrom('accounts')
        .select('id')
        .where((w) => w.or([w('id', '=', ownerId), w('owner_account_id', '=', ownerId)]));
    const stored = await db
      .selectFrom('backups')
      .select(sql<string | number>`coalesce(sum(ciphertext_size_bytes), 0)`.as('s'))
      .where('account_id', 'in', fleet)
      .where(STORED)
      .executeTakeFirstOrThrow();
    const reserved = await db
      .selectFrom('upload_reservations')
      .select(sql<string | number>`coalesce(sum(bytes), 0)`.as('r'))
      .where('account_id', 'in', fleet)
      .where('expires_at', '>', now)
      .executeTakeFirstOrThrow();
    return Number(stored.s) + Number(reserved.r);
  }

  async reserveUpload(
    reservation: UploadReservation,
    now: number,
    size: (quota: number | null, usage: number) => number | null,
    quotaOf: (account: Account) => number | null,
  ): Promise<ReserveResult> {
    return this.ctx.transaction(async (trx) => {
      // The fleet owner's row lock (write lock in SQLite) serializes the reservations of the owner and all its host
      // accounts on every node: one budget, one lock.
      const owner = await this.ctx.lockFleet(trx, reservation.accountId);
      const quota = quotaOf(owner);
      const usage = quota === null ? 0 : await this.fleetStored(trx, owner.id, now);
      const bytes = size(quota, usage);
      if (bytes === null) return { reserved: null, quota: quota!, usage };
      const row = {
        id: reservation.id,
        account_id: reservation.accountId,
        backup_id: reservation.backupId,
        bytes,
        expires_at: reservation.expiresAt,
      };
      await this.ctx.cached(trx, 'writes', 'insertReservation', Object.values(row), (db) =>
        db.insertInto('upload_reservations').values(row),
      );
      return { reserved: bytes };
    });
  }

  async releaseUpload(id: string): Promise<void> {
    await this.ctx.deleteReservation(this.ctx.db, id);
  }
}
