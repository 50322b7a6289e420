/** AccountStore on SQL: accounts, their plans, labels, deletion grace and quota settings. */
import type { Kysely, Selectable } from 'kysely';
import type { Account } from '../../domain/entities.js';
import type { Plan } from '../../domain/plans.js';
import type { AccountStore } from '../ports/accounts.js';
import type { AccountsTable, Database as Schema } from '../schema.js';
import type { SqlContext } from './context.js';
import { num, numOrNull } from './rows.js';

export function toAccount(row: Selectable<AccountsTable>): Account {
  return {
    id: row.id,
    plan: row.plan as Plan,
    createdAt: num(row.created_at),
    lastReadyCreatedAt: numOrNull(row.last_ready_created_at),
    deletionGraceDays: num(row.deletion_grace_days),
    ...(num(row.quota_override) === 1 ? { quotaOverride: numOrNull(row.quota_bytes) } : {}),
    ...(row.owner_account_id ? { ownerAccountId: row.owner_account_id } : {}),
    ...(row.label ? { label: row.label } : {}),
    ...(row.operator_label ? { operatorLabel: row.operator_label } : {}),
  };
}

export class SqlAccountStore implements AccountStore {
  constructor(private readonly ctx: SqlContext) {}

  async createAccount(account: Account): Promise<Account> {
    const insert = async (db: Kysely<Schema>, stored: Account) => {
      await db
        .insertInto('accounts')
        .values({
          id: stored.id,
          plan: stored.plan,
          created_at: stored.createdAt,
          last_ready_created_at: stored.lastReadyCreatedAt,
          deletion_grace_days: stored.deletionGraceDays ?? 0,
          owner_account_id: stored.ownerAccountId ?? null,
          label: stored.label ?? null,
          operator_label: stored.operatorLabel ?? null,
        })
        .execute();
      return stored;
    };
    const ownerId = account.ownerAccountId;
    if (!ownerId) return insert(this.ctx.db, account);
    // A host account is on its owner's plan: read under the owner's row lock, which setPlan takes first too.
    return this.ctx.transaction(async (trx) => insert(trx, { ...account, plan: (await this.ctx.lockAccount(trx, ownerId)).plan }));
  }

  async getAccount(id: string): Promise<Account | undefined> {
    const [row] = await this.ctx.read('getAccount', [id], (db) => db.selectFrom('accounts').selectAll().where('id', '=', id));
    return row && toAccount(row);
  }

  async listAccounts(): Promise<Account[]> {
    const rows = await this.ctx.db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('id').execute();
    return rows.map(toAccount);
  }

  async listHostAccounts(ownerAccountId: string): Promise<Account[]> {
    const rows = await this.ctx.db
      .selectFrom('accounts')
      .selectAll()
      .where('owner_account_id', '=', ownerAccountId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toAccount);
  }

  async setPlan(accountId: string, plan: Plan): Promise<boolean> {
    return this.ctx.transaction(async (trx) => {
      // The owner's row first: a host account being added waits for it (createAccount) or is seen by the second
      // statement, whose snapshot is taken once the lock is held.
      const result = await trx.updateTable('accounts').set({ plan }).where('id', '=', accountId).executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return false;
      await trx.updateTable('accounts').set({ plan }).where('owner_account_id', '=', accountId).execute();
      return true;
    });
  }

  async setOperatorLabel(accountId: string, label: string | null): Promise<boolean> {
    const result = await this.ctx.db.updateTable('accounts').set({ operator_label: label }).where('id', '=', accountId).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async setDeletionGrace(accountId: string, days: number): Promise<boolean> {
    const result = await this.ctx.db
      .updateTable('accounts')
      .set({ deletion_grace_days: days })
      .where('id', '=', accountId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async setQuota(accountId: string, quota: number | null | undefined): Promise<boolean> {
    const result = await this.ctx.db
      .updateTable('accounts')
      .set({ quota_override: quota === undefined ? 0 : 1, quota_bytes: quota ?? null })
      .where('id', '=', accountId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }
}
