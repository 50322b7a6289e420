/** The Store on any Kysely dialect. SQLite and PostgreSQL differ only in how the Kysely instance is built. */
import {
  type Compilable,
  CompiledQuery,
  type Kysely,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type Selectable,
  type Transaction,
  type UnknownRow,
  sql,
} from 'kysely';
import {
  IN_FLIGHT_STATUSES,
  type BackupStatus,
  type CreateDecision,
  type CreateSnapshot,
} from '../domain/backups.js';
import type { Plan } from '../domain/plans.js';
import type { Scope } from '../domain/scopes.js';
import { migrateToLatest } from './migrations.js';
import type {
  AccountsTable,
  ApiKeysTable,
  BackupsTable,
  Database,
  LoginLinksTable,
  SessionsTable,
  VaultsTable,
} from './schema.js';
import type {
  Account,
  ApiKey,
  Backup,
  BackupCondition,
  BackupPatch,
  LoginLink,
  QueryCounts,
  Session,
  Store,
  Vault,
} from './store.js';

// PostgreSQL bigint columns can arrive as strings; SQLite returns numbers. Normalise once here.
const num = (value: number | string): number => Number(value);
const numOrNull = (value: number | string | null): number | null => (value === null ? null : Number(value));

function toAccount(row: Selectable<AccountsTable>): Account {
  return {
    id: row.id,
    plan: row.plan as Plan,
    createdAt: num(row.created_at),
    lastReadyCreatedAt: numOrNull(row.last_ready_created_at),
  };
}

function toApiKey(row: Selectable<ApiKeysTable>): ApiKey {
  return {
    id: row.id,
    accountId: row.account_id,
    scopes: row.scopes.split(',').filter(Boolean) as Scope[],
    createdAt: num(row.created_at),
    expiresAt: numOrNull(row.expires_at),
    revokedAt: numOrNull(row.revoked_at),
  };
}

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

function toLoginLink(row: Selectable<LoginLinksTable>): LoginLink {
  return {
    id: row.id,
    accountId: row.account_id,
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    usedAt: numOrNull(row.used_at),
  };
}

function toSession(row: Selectable<SessionsTable>): Session {
  return {
    id: row.id,
    accountId: row.account_id,
    keyId: row.key_id,
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    revokedAt: numOrNull(row.revoked_at),
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

/** Counts every statement the store sends (SELECT = read; INSERT/UPDATE/DELETE = write; anything else = other). */
class QueryCounter implements KyselyPlugin {
  readonly counts = { reads: 0, writes: 0, other: 0 };

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

export class SqlStore implements Store {
  /** Exclusive sections held by this process (the whole story for SQLite, which serves one node). */
  private readonly held = new Set<string>();
  private readonly counter = new QueryCounter();
  private readonly db: Kysely<Database>;
  /** SQL text of the hot reads, compiled once (see read()). */
  private readonly compiled = new Map<string, string>();

  constructor(
    readonly kind: 'sqlite' | 'postgres',
    private readonly uncounted: Kysely<Database>,
  ) {
    this.db = uncounted.withPlugin(this.counter);
  }

  /**
   * The reads every request makes (API key, account, vault, backup, list) skip Kysely's query builder and
   * compiler after their first use: building and compiling cost ~20 µs per query, as much as SQLite's own
   * work (bench P3). The first call compiles with the real values and checks that the parameters come out
   * in the order given, so the cached SQL text is always run with the right bindings.
   */
  private async read<R>(key: string, parameters: unknown[], build: (db: Kysely<Database>) => Compilable<R>): Promise<R[]> {
    let text = this.compiled.get(key);
    if (text === undefined) {
      const query = build(this.uncounted).compile();
      if (query.parameters.length !== parameters.length || query.parameters.some((p, i) => p !== parameters[i])) {
        throw new Error(`${key}: compiled parameters are not in the given order`);
      }
      text = query.sql;
      this.compiled.set(key, text);
    }
    this.counter.counts.reads += 1;
    return (await this.db.executeQuery<R>(CompiledQuery.raw(text, parameters))).rows;
  }

  queryCounts(): QueryCounts {
    return { ...this.counter.counts };
  }

  async migrate(): Promise<void> {
    // Kysely looks for its migration tables in every schema unless told which one: with Coffer's tables in
    // another schema of the same database, it would skip creating its own and then fail to lock them.
    const schema =
      this.kind === 'postgres' ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(this.db)).rows[0]?.schema : undefined;
    await migrateToLatest(this.db as Kysely<unknown>, schema);
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  async createAccount(account: Account): Promise<void> {
    await this.db
      .insertInto('accounts')
      .values({
        id: account.id,
        plan: account.plan,
        created_at: account.createdAt,
        last_ready_created_at: account.lastReadyCreatedAt,
      })
      .execute();
  }

  async getAccount(id: string): Promise<Account | undefined> {
    const [row] = await this.read('getAccount', [id], (db) => db.selectFrom('accounts').selectAll().where('id', '=', id));
    return row && toAccount(row);
  }

  async listAccounts(): Promise<Account[]> {
    const rows = await this.db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('id').execute();
    return rows.map(toAccount);
  }

  async setPlan(accountId: string, plan: Plan): Promise<boolean> {
    const result = await this.db.updateTable('accounts').set({ plan }).where('id', '=', accountId).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async createApiKey(key: ApiKey, keyHash: string): Promise<void> {
    await this.db
      .insertInto('api_keys')
      .values({
        id: key.id,
        account_id: key.accountId,
        key_hash: keyHash,
        scopes: key.scopes.join(','),
        created_at: key.createdAt,
        expires_at: key.expiresAt,
        revoked_at: key.revokedAt,
      })
      .execute();
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKey | undefined> {
    const [row] = await this.read('findApiKeyByHash', [keyHash], (db) =>
      db.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash),
    );
    return row && toApiKey(row);
  }

  async listApiKeys(accountId?: string): Promise<ApiKey[]> {
    let query = this.db.selectFrom('api_keys').selectAll();
    if (accountId !== undefined) query = query.where('account_id', '=', accountId);
    const rows = await query.orderBy('created_at').orderBy('id').execute();
    return rows.map(toApiKey);
  }

  async getApiKey(keyId: string): Promise<ApiKey | undefined> {
    const row = await this.db.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirst();
    return row && toApiKey(row);
  }

  async revokeApiKey(keyId: string, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async createLoginLink(link: LoginLink, tokenHash: string): Promise<void> {
    await this.db
      .insertInto('login_links')
      .values({
        id: link.id,
        account_id: link.accountId,
        token_hash: tokenHash,
        created_at: link.createdAt,
        expires_at: link.expiresAt,
        used_at: link.usedAt,
      })
      .execute();
  }

  async consumeLoginLink(tokenHash: string, now: number): Promise<LoginLink | undefined> {
    // One conditional UPDATE: of two concurrent uses (on any nodes), exactly one matches the row.
    const row = await this.db
      .updateTable('login_links')
      .set({ used_at: now })
      .where('token_hash', '=', tokenHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .returningAll()
      .executeTakeFirst();
    return row && toLoginLink(row);
  }

  async createSession(session: Session, tokenHash: string): Promise<void> {
    await this.db
      .insertInto('sessions')
      .values({
        id: session.id,
        account_id: session.accountId,
        token_hash: tokenHash,
        key_id: session.keyId,
        created_at: session.createdAt,
        expires_at: session.expiresAt,
        revoked_at: session.revokedAt,
      })
      .execute();
  }

  async findSessionByHash(tokenHash: string): Promise<Session | undefined> {
    const row = await this.db.selectFrom('sessions').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
    return row && toSession(row);
  }

  async revokeSession(sessionId: string, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('sessions')
      .set({ revoked_at: at })
      .where('id', '=', sessionId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async pruneSessions(before: number): Promise<number> {
    const links = await this.db
      .deleteFrom('login_links')
      .where((eb) => eb.or([eb('expires_at', '<', before), eb('used_at', '<', before)]))
      .executeTakeFirst();
    const sessions = await this.db
      .deleteFrom('sessions')
      .where((eb) =>
        eb.or([
          eb('expires_at', '<', before),
          eb('revoked_at', '<', before),
          eb(
            'key_id',
            'in',
            eb
              .selectFrom('api_keys')
              .select('id')
              .where((keys) => keys.or([keys('revoked_at', '<', before), keys('expires_at', '<', before)])),
          ),
        ]),
      )
      .executeTakeFirst();
    return Number(links.numDeletedRows) + Number(sessions.numDeletedRows);
  }

  async getVault(accountId: string): Promise<Vault | undefined> {
    const [row] = await this.read('getVault', [accountId], (db) =>
      db.selectFrom('vaults').selectAll().where('account_id', '=', accountId),
    );
    return row && toVault(row);
  }

  async createVault(accountId: string, vault: Vault): Promise<boolean> {
    const result = await this.db
      .insertInto('vaults')
      .values({ ...vaultRow(accountId, vault), created_at: vault.createdAt ?? vault.updatedAt })
      .onConflict((oc) => oc.column('account_id').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async replaceVault(accountId: string, vault: Vault, expected?: Vault): Promise<boolean> {
    const { account_id: _, ...columns } = vaultRow(accountId, vault);
    let update = this.db.updateTable('vaults').set(columns).where('account_id', '=', accountId);
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
  }

  async deleteVault(accountId: string): Promise<boolean> {
    const result = await this.db.deleteFrom('vaults').where('account_id', '=', accountId).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async createBackup(
    accountId: string,
    now: number,
    decide: (snapshot: CreateSnapshot) => CreateDecision,
    backup: Backup,
  ): Promise<CreateDecision> {
    return this.db.transaction().execute(async (trx) => {
      // Writing the account row first takes the write lock (SQLite) or the row lock (PostgreSQL), so
      // concurrent creates for one account run one after another and see each other's slot.
      const account = await this.lockAccount(trx, accountId);
      const vault = await trx.selectFrom('vaults').select('account_id').where('account_id', '=', accountId).executeTakeFirst();
      const inFlight = await trx
        .selectFrom('backups')
        .select('id')
        .where('account_id', '=', accountId)
        .where('status', 'in', IN_FLIGHT_STATUSES)
        .where('expires_at', '>', now)
        .orderBy('created_at', 'desc')
        .executeTakeFirst();
      const decision = decide({
        plan: account.plan,
        vaultInitialized: vault !== undefined,
        inFlightBackupId: inFlight?.id ?? null,
        lastReadyCreatedAt: account.lastReadyCreatedAt,
      });
      if (decision.allowed) await trx.insertInto('backups').values(backupRow(backup)).execute();
      return decision;
    });
  }

  private async lockAccount(trx: Transaction<Database>, accountId: string): Promise<Account> {
    const row = await trx
      .updateTable('accounts')
      .set({ plan: sql`plan` })
      .where('id', '=', accountId)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw new Error(`account ${accountId} does not exist`);
    return toAccount(row);
  }

  async getBackup(id: string): Promise<Backup | undefined> {
    const [row] = await this.read('getBackup', [id], (db) => db.selectFrom('backups').selectAll().where('id', '=', id));
    return row && toBackup(row);
  }

  async listBackups(accountId: string, statuses: readonly BackupStatus[]): Promise<Backup[]> {
    if (statuses.length === 0) return [];
    const rows = await this.read(`listBackups/${statuses.length}`, [accountId, ...statuses], (db) =>
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

  updateBackup(id: string, condition: BackupCondition, patch: BackupPatch): Promise<Backup | undefined> {
    return this.conditionalUpdate(this.db, id, condition, patch);
  }

  markReady(id: string, condition: BackupCondition, patch: BackupPatch): Promise<Backup | undefined> {
    return this.db.transaction().execute(async (trx) => {
      const backup = await this.conditionalUpdate(trx, id, condition, { ...patch, status: 'READY' });
      if (backup) {
        await trx
          .updateTable('accounts')
          .set({ last_ready_created_at: backup.createdAt })
          .where('id', '=', backup.accountId)
          .where((eb) =>
            eb.or([eb('last_ready_created_at', 'is', null), eb('last_ready_created_at', '<', backup.createdAt)]),
          )
          .execute();
      }
      return backup;
    });
  }

  private async conditionalUpdate(
    db: Kysely<Database>,
    id: string,
    condition: BackupCondition,
    patch: BackupPatch,
  ): Promise<Backup | undefined> {
    let query = db
      .updateTable('backups')
      .set(backupPatchRow(patch))
      .where('id', '=', id)
      .where('status', 'in', condition.statuses);
    if (condition.ciphertextSizeBytes !== undefined) {
      query = query.where('ciphertext_size_bytes', '=', condition.ciphertextSizeBytes);
    }
    const row = await query.returningAll().executeTakeFirst();
    return row && toBackup(row);
  }

  async listSweepCandidates(now: number, accountId?: string): Promise<Backup[]> {
    let query = this.db
      .selectFrom('backups')
      .selectAll()
      .where((eb) =>
        eb.or([
          eb.and([eb('status', 'in', IN_FLIGHT_STATUSES), eb('expires_at', '<=', now)]),
          eb.and([eb('status', '=', 'READY'), eb('expires_at', '<=', now)]),
          eb('status', 'in', ['FAILED', 'DELETING']),
        ]),
      );
    if (accountId !== undefined) query = query.where('account_id', '=', accountId);
    const rows = await query.orderBy('created_at').limit(500).execute();
    return rows.map(toBackup);
  }

  async liveBlobKeys(blobKeys: readonly string[]): Promise<Set<string>> {
    const live = new Set<string>();
    for (let i = 0; i < blobKeys.length; i += 500) {
      const rows = await this.db
        .selectFrom('backups')
        .select('blob_key')
        .where('blob_key', 'in', blobKeys.slice(i, i + 500))
        .where('status', '!=', 'DELETED')
        .execute();
      for (const row of rows) if (row.blob_key !== null) live.add(row.blob_key);
    }
    return live;
  }

  async ensureSetting(name: string, initial: string, now: number): Promise<string> {
    await this.db
      .insertInto('settings')
      .values({ name, value: initial, created_at: now })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    const row = await this.db.selectFrom('settings').select('value').where('name', '=', name).executeTakeFirstOrThrow();
    return row.value;
  }

  async tryExclusive<T>(name: string, task: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
    if (this.held.has(name)) return { ran: false };
    this.held.add(name);
    try {
      if (this.kind === 'sqlite') return { ran: true, value: await task() };
      // A session-level advisory lock on one reserved connection: released by the unlock below, or by
      // PostgreSQL itself when a crashed node's connection goes away. Keyed per schema, so deployments
      // (or test runs) sharing a database in different schemas do not block each other.
      return await this.db.connection().execute(async (connection) => {
        const key = sql`${sql.lit(ADVISORY_LOCK_CLASS)}, hashtext(current_schema() || ':' || ${name})`;
        const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${key}) as locked`.execute(connection);
        if (!rows[0]?.locked) return { ran: false as const };
        try {
          return { ran: true as const, value: await task() };
        } finally {
          await sql`select pg_advisory_unlock(${key})`.execute(connection);
        }
      });
    } finally {
      this.held.delete(name);
    }
  }
}

/** First key of every Coffer advisory lock ("COFF"), so they never collide with other applications' locks. */
const ADVISORY_LOCK_CLASS = 0x434f4646;
