/** VaultStore on SQL: vault envelopes and the history of replaced ones. */
import { type Kysely, type Selectable, type Transaction, sql } from 'kysely';
import type { Vault, VaultChange, VaultHistoryEntry } from '../../domain/entities.js';
import type { VaultKeep, VaultStore } from '../ports/vaults.js';
import type { Database as Schema, VaultHistoryTable, VaultsTable } from '../schema.js';
import type { SqlContext } from './context.js';
import { num } from './rows.js';

function toVault(row: Selectable<VaultsTable>): Vault {
  return {
    cryptoVersion: 'v1',
    kdf: { salt: row.kdf_salt, opslimit: num(row.kdf_opslimit), memlimit: num(row.kdf_memlimit) },
    wrappedMasterKey: row.wrapped_master_key,
    wrappedMasterKeyNonce: row.wrapped_master_key_nonce,
    updatedAt: num(row.updated_at),
    ...(row.created_at === null ? {} : { createdAt: num(row.created_at) }),
  };
}

/** The columns a rotation replaces (created_at is written once, by createVault). */
function vaultRow(accountId: string, vault: Vault): Omit<VaultsTable, 'created_at'> {
  return {
    account_id: accountId,
    crypto_version: vault.cryptoVersion,
    kdf_salt: vault.kdf.salt,
    kdf_opslimit: vault.kdf.opslimit,
    kdf_memlimit: vault.kdf.memlimit,
    wrapped_master_key: vault.wrappedMasterKey,
    wrapped_master_key_nonce: vault.wrappedMasterKeyNonce,
    updated_at: vault.updatedAt,
  };
}

function toVaultHistoryEntry(row: Selectable<VaultHistoryTable>): VaultHistoryEntry {
  return {
    id: row.id,
    accountId: row.account_id,
    vault: {
      cryptoVersion: 'v1',
      kdf: { salt: row.kdf_salt, opslimit: num(row.kdf_opslimit), memlimit: num(row.kdf_memlimit) },
      wrappedMasterKey: row.wrapped_master_key,
      wrappedMasterKeyNonce: row.wrapped_master_key_nonce,
      updatedAt: num(row.stored_at),
      ...(row.created_at === null ? {} : { createdAt: num(row.created_at) }),
    },
    replacedAt: num(row.replaced_at),
    replacedBy: row.replaced_by,
    reason: row.reason as VaultChange,
    expiresAt: num(row.expires_at),
  };
}

export class SqlVaultStore implements VaultStore {
  constructor(private readonly ctx: SqlContext) {}

  async getVault(accountId: string): Promise<Vault | undefined> {
    const [row] = await this.ctx.read('getVault', [accountId], (db) =>
      db.selectFrom('vaults').selectAll().where('account_id', '=', accountId),
    );
    return row && toVault(row);
  }

  async createVault(accountId: string, vault: Vault): Promise<boolean> {
    const result = await this.ctx.db
      .insertInto('vaults')
      .values({ ...vaultRow(accountId, vault), created_at: vault.createdAt ?? vault.updatedAt })
      .onConflict((oc) => oc.column('account_id').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async replaceVault(
    accountId: string,
    vault: Vault,
    { keep, expected }: { keep?: VaultKeep | undefined; expected?: Vault | undefined } = {},
  ): Promise<boolean> {
    const { account_id: _, ...columns } = vaultRow(accountId, vault);
    const replace = async (db: Kysely<Schema>) => {
      let update = db.updateTable('vaults').set(columns).where('account_id', '=', accountId);
      if (expected) {
        update = update
          .where('crypto_version', '=', expected.cryptoVersion)
          .where('kdf_salt', '=', expected.kdf.salt)
          .where('kdf_opslimit', '=', expected.kdf.opslimit)
          .where('kdf_memlimit', '=', expected.kdf.memlimit)
          .where('wrapped_master_key', '=', expected.wrappedMasterKey)
          .where('wrapped_master_key_nonce', '=', expected.wrappedMasterKeyNonce);
      }
      const result = await update.executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    };
    if (!keep) return replace(this.ctx.db);
    const notReplaced = new Error('not replaced');
    return this.ctx.db
      .transaction()
      .execute(async (trx) => {
        if (!(await this.keepVault(trx, accountId, keep))) return false;
        // A failed compare-and-swap rolls the kept copy back with it.
        if (!(await replace(trx))) throw notReplaced;
        return true;
      })
      .catch((error: unknown) => {
        if (error === notReplaced) return false;
        throw error;
      });
  }

  async deleteVault(accountId: string, keep?: VaultKeep): Promise<boolean> {
    const remove = async (db: Kysely<Schema>) => {
      const result = await db.deleteFrom('vaults').where('account_id', '=', accountId).executeTakeFirst();
      return Number(result.numDeletedRows) > 0;
    };
    if (!keep) return remove(this.ctx.db);
    return this.ctx.transaction(async (trx) => {
      await this.keepVault(trx, accountId, keep);
      return remove(trx);
    });
  }

  /**
   * Copies the account's current vault into the history (inside the caller's transaction, after locking the vault
   * row so that two concurrent changes keep both envelopes) and trims the history to `keep.limit` entries: the
   * oldest and the newest stay.
   * False when there is no vault.
   */
  private async keepVault(trx: Transaction<Schema>, accountId: string, keep: VaultKeep): Promise<boolean> {
    const current = await trx
      .updateTable('vaults')
      .set({ updated_at: sql`updated_at` })
      .where('account_id', '=', accountId)
      .returningAll()
      .executeTakeFirst();
    if (!current) return false;
    await trx
      .insertInto('vault_history')
      .values({
        id: keep.id,
        account_id: accountId,
        crypto_version: current.crypto_version,
        kdf_salt: current.kdf_salt,
        kdf_opslimit: current.kdf_opslimit,
        kdf_memlimit: current.kdf_memlimit,
        wrapped_master_key: current.wrapped_master_key,
        wrapped_master_key_nonce: current.wrapped_master_key_nonce,
        stored_at: current.updated_at,
        created_at: current.created_at,
        replaced_at: keep.replacedAt,
        replaced_by: keep.replacedBy,
        reason: keep.reason,
        expires_at: keep.expiresAt,
      })
      .execute();
    // Over the limit, the oldest entries (limit - 1 of them) and the newest stay; the ones between go. Evicting the
    // oldest instead would let a stolen key push the owner's real envelope out with a burst of rotations.
    const ids = (
      await trx
        .selectFrom('vault_history')
        .select('id')
        .where('account_id', '=', accountId)
        .orderBy('replaced_at', 'asc')
        .orderBy('id', 'asc')
        .execute()
    ).map((row) => row.id);
    if (ids.length > keep.limit) {
      const drop = ids.slice(Math.max(1, keep.limit) - 1, -1);
      if (drop.length > 0) await trx.deleteFrom('vault_history').where('id', 'in', drop).execute();
    }
    return true;
  }

  async listVaultHistory(accountId: string, now: number): Promise<VaultHistoryEntry[]> {
    const rows = await this.ctx.db
      .selectFrom('vault_history')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('expires_at', '>', now)
      .orderBy('replaced_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    return rows.map(toVaultHistoryEntry);
  }

  async restoreVault(accountId: string, entryId: string, now: number, keep: VaultKeep | undefined): Promise<Vault | undefined> {
    return this.ctx.transaction(async (trx) => {
      // Claim the entry first: of two concurrent restores of one entry, exactly one deletes it.
      const claimed = await trx
        .deleteFrom('vault_history')
        .where('id', '=', entryId)
        .where('account_id', '=', accountId)
        .where('expires_at', '>', now)
        .returningAll()
        .executeTakeFirst();
      if (!claimed) return undefined;
      const entry = toVaultHistoryEntry(claimed);
      const vault: Vault = { ...entry.vault, updatedAt: now };
      const hadVault = keep ? await this.keepVault(trx, accountId, keep) : false;
      if (hadVault) {
        const { account_id: _, ...columns } = vaultRow(accountId, vault);
        await trx.updateTable('vaults').set(columns).where('account_id', '=', accountId).execute();
      } else {
        await trx.deleteFrom('vaults').where('account_id', '=', accountId).execute();
        await trx
          .insertInto('vaults')
          .values({ ...vaultRow(accountId, vault), created_at: entry.vault.createdAt ?? entry.vault.updatedAt })
          .execute();
      }
      return vault;
    });
  }

  async pruneVaultHistory(now: number): Promise<number> {
    const result = await this.ctx.db.deleteFrom('vault_history').where('expires_at', '<=', now).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
