/** KeyStore on SQL: API keys, known by hash. */
import type { Selectable } from 'kysely';
import type { ApiKey } from '../../domain/entities.js';
import type { Scope } from '../../domain/scopes.js';
import type { KeyStore } from '../ports/keys.js';
import type { ApiKeysTable } from '../schema.js';
import type { SqlContext } from './context.js';
import { num, numOrNull } from './rows.js';

function toApiKey(row: Selectable<ApiKeysTable>): ApiKey {
  return {
    id: row.id,
    accountId: row.account_id,
    scopes: row.scopes.split(',').filter(Boolean) as Scope[],
    createdAt: num(row.created_at),
    expiresAt: numOrNull(row.expires_at),
    revokedAt: numOrNull(row.revoked_at),
    appendOnly: Number(row.append_only) === 1,
    ...(row.minted_fresh_at === null ? {} : { mintedFreshAt: num(row.minted_fresh_at) }),
    ...(row.label === null ? {} : { label: row.label }),
  };
}

export class SqlKeyStore implements KeyStore {
  constructor(private readonly ctx: SqlContext) {}

  async createApiKey(key: ApiKey, keyHash: string): Promise<void> {
    await this.ctx.db
      .insertInto('api_keys')
      .values({
        id: key.id,
        account_id: key.accountId,
        key_hash: keyHash,
        scopes: key.scopes.join(','),
        created_at: key.createdAt,
        expires_at: key.expiresAt,
        revoked_at: key.revokedAt,
        append_only: key.appendOnly ? 1 : 0,
        minted_fresh_at: key.mintedFreshAt ?? null,
        label: key.label ?? null,
      })
      .execute();
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKey | undefined> {
    const [row] = await this.ctx.read('findApiKeyByHash', [keyHash], (db) =>
      db.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash),
    );
    return row && toApiKey(row);
  }

  async listApiKeys(accountId?: string): Promise<ApiKey[]> {
    let query = this.ctx.db.selectFrom('api_keys').selectAll();
    if (accountId !== undefined) query = query.where('account_id', '=', accountId);
    const rows = await query.orderBy('created_at').orderBy('id').execute();
    return rows.map(toApiKey);
  }

  async getApiKey(keyId: string): Promise<ApiKey | undefined> {
    const row = await this.ctx.db.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirst();
    return row && toApiKey(row);
  }

  async revokeApiKey(keyId: string, at: number): Promise<boolean> {
    const result = await this.ctx.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }
}
