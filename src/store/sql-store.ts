/** The Store on any Kysely dialect. SQLite and PostgreSQL differ only in how the Kysely instance is built. */
import {
  type Compilable,
  CompiledQuery,
  type ExpressionBuilder,
  type Kysely,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RawBuilder,
  type RootOperationNode,
  type Selectable,
  type Transaction,
  type UnknownRow,
  sql,
} from 'kysely';
import { IN_FLIGHT_STATUSES, type BackupStatus, type CreateDecision, type CreateSnapshot } from '../domain/backups.js';
import type { ActorKind, AuditAction, AuditEntry, AuditOutcome } from '../domain/audit.js';
import type { Plan } from '../domain/plans.js';
import type { Scope } from '../domain/scopes.js';
import { migrateToLatest } from './migrations.js';
import type {
  AccountsTable,
  ApiKeysTable,
  AuditEventsTable,
  BackupsTable,
  Database,
  LoginLinksTable,
  OperatorLoginLinksTable,
  OperatorSessionsTable,
  SessionsTable,
  VaultHistoryTable,
  VaultsTable,
} from './schema.js';
import type {
  Account,
  AccountUsageRow,
  ApiKey,
  Backup,
  BackupCondition,
  BackupPatch,
  LoginLink,
  OperatorLink,
  OperatorSession,
  QueryCounts,
  ReserveResult,
  FleetUsage,
  Session,
  Store,
  Vault,
  VaultChange,
  VaultHistoryEntry,
  VaultKeep,
  UploadReservation,
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
    deletionGraceDays: num(row.deletion_grace_days),
    ...(num(row.quota_override) === 1 ? { quotaOverride: numOrNull(row.quota_bytes) } : {}),
    ...(row.owner_account_id ? { ownerAccountId: row.owner_account_id } : {}),
    ...(row.label ? { label: row.label } : {}),
    ...(row.operator_label ? { operatorLabel: row.operator_label } : {}),
  };
}

/** Backups whose ciphertext counts as stored: READY, UPLOADED (not yet finalized), DELETING in its grace. */
const STORED = sql<boolean>`(status in ('READY', 'UPLOADED') or (status = 'DELETING' and purge_after is not null))`;

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

function toAuditEntry(row: Selectable<AuditEventsTable>): AuditEntry {
  return {
    id: row.id,
    accountId: row.account_id,
    at: num(row.at),
    action: row.action as AuditAction,
    outcome: row.outcome as AuditOutcome,
    actor: { kind: row.actor_kind as ActorKind, id: row.actor_id },
    address: row.address,
    target: row.target,
    detail: row.detail,
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
    freshAt: num(row.fresh_at ?? row.created_at),
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
    purgeAfter: numOrNull(row.purge_after),
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

  /** Store.changeVersion, where the engine has one (SQLite). */
  readonly changeVersion?: () => number;

  constructor(
    readonly kind: 'sqlite' | 'postgres',
    private readonly uncounted: Kysely<Database>,
    changeVersion?: () => number,
  ) {
    this.db = uncounted.withPlugin(this.counter);
    if (changeVersion) this.changeVersion = changeVersion;
  }

  /**
   * The reads every request makes (API key, account, vault, backup, list) skip Kysely's query builder and
   * compiler after their first use: building and compiling cost ~20 µs per query, as much as SQLite's own
   * work (bench P3). The first call compiles with the real values and checks that the parameters come out
   * in the order given, so the cached SQL text is always run with the right bindings.
   */
  private read<R>(key: string, parameters: unknown[], build: (db: Kysely<Database>) => Compilable<R>): Promise<R[]> {
    return this.cached(this.db, 'reads', key, parameters, build);
  }

  /**
   * The same for the statements of the backup cycle's writes (bench P8), run on `db` (the store's, or a transaction).
   * `key` must name everything that shapes the SQL text (the columns set, the length of an IN list, the conditions).
   */
  private async cached<R>(
    db: Kysely<Database>,
    kind: 'reads' | 'writes',
    key: string,
    parameters: unknown[],
    build: (db: Kysely<Database>) => Compilable<R>,
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

  queryCounts(): QueryCounts {
    return { ...this.counter.counts };
  }

  async migrate(): Promise<void> {
    // Kysely looks for its migration tables in every schema unless told which one: with Coffer's tables in
    // another schema of the same database, it would skip creating its own and then fail to lock them.
    const schema =
      this.kind === 'postgres'
        ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(this.db)).rows[0]?.schema
        : undefined;
    await migrateToLatest(this.db as Kysely<unknown>, this.kind, schema);
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  async createAccount(account: Account): Promise<Account> {
    const insert = async (db: Kysely<Database>, stored: Account) => {
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
    if (!ownerId) return insert(this.db, account);
    // A host account is on its owner's plan: read under the owner's row lock, which setPlan takes first too.
    return this.db.transaction().execute(async (trx) => insert(trx, { ...account, plan: (await this.lockAccount(trx, ownerId)).plan }));
  }

  async getAccount(id: string): Promise<Account | undefined> {
    const [row] = await this.read('getAccount', [id], (db) => db.selectFrom('accounts').selectAll().where('id', '=', id));
    return row && toAccount(row);
  }

  async listAccounts(): Promise<Account[]> {
    const rows = await this.db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('id').execute();
    return rows.map(toAccount);
  }

  async listHostAccounts(ownerAccountId: string): Promise<Account[]> {
    const rows = await this.db
      .selectFrom('accounts')
      .selectAll()
      .where('owner_account_id', '=', ownerAccountId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toAccount);
  }

  async setPlan(accountId: string, plan: Plan): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      // The owner's row first: a host account being added waits for it (createAccount) or is seen by the second
      // statement, whose snapshot is taken once the lock is held.
      const result = await trx.updateTable('accounts').set({ plan }).where('id', '=', accountId).executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return false;
      await trx.updateTable('accounts').set({ plan }).where('owner_account_id', '=', accountId).execute();
      return true;
    });
  }

  async setOperatorLabel(accountId: string, label: string | null): Promise<boolean> {
    const result = await this.db.updateTable('accounts').set({ operator_label: label }).where('id', '=', accountId).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async setQuota(accountId: string, quota: number | null | undefined): Promise<boolean> {
    const result = await this.db
      .updateTable('accounts')
      .set({ quota_override: quota === undefined ? 0 : 1, quota_bytes: quota ?? null })
      .where('id', '=', accountId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async usage(now: number, accountId?: string, since?: number): Promise<AccountUsageRow[]> {
    const count = (eb: ExpressionBuilder<Database & { a: AccountsTable }, 'a'>, where: RawBuilder<boolean>, alias: string) =>
      eb
        .selectFrom('backups')
        .select(sql<string | number>`count(*)`.as('c'))
        .whereRef('backups.account_id', '=', 'a.id')
        .where(where)
        .as(alias);
    let query = this.db
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

  async fleetUsage(now: number, accountId: string): Promise<FleetUsage | undefined> {
    const [row] = await this.db
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
    const members = await this.db
      .selectFrom('accounts')
      .select(sql<string | number>`count(*)`.as('c'))
      .where((w) => w.or([w('id', '=', row.id), w('owner_account_id', '=', row.id)]))
      .executeTakeFirstOrThrow();
    return { owner: toAccount(row), storedBytes: await this.fleetStored(this.db, row.id, now), accounts: Number(members.c) };
  }

  /** What the fleet of `ownerId` (the owner and its host accounts) stores at `now`, reservations included. */
  private async fleetStored(db: Kysely<Database>, ownerId: string, now: number): Promise<number> {
    const fleet = (eb: ExpressionBuilder<Database, 'backups' | 'upload_reservations'>) =>
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
    return this.db.transaction().execute(async (trx) => {
      // The fleet owner's row lock (write lock in SQLite) serializes the reservations of the owner and all its host
      // accounts on every node: one budget, one lock.
      const owner = await this.lockFleet(trx, reservation.accountId);
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
      await this.cached(trx, 'writes', 'insertReservation', Object.values(row), (db) => db.insertInto('upload_reservations').values(row));
      return { reserved: bytes };
    });
  }

  async releaseUpload(id: string): Promise<void> {
    await this.deleteReservation(this.db, id);
  }

  private deleteReservation(db: Kysely<Database>, id: string): Promise<unknown[]> {
    return this.cached(db, 'writes', 'deleteReservation', [id], (db) => db.deleteFrom('upload_reservations').where('id', '=', id));
  }

  async setDeletionGrace(accountId: string, days: number): Promise<boolean> {
    const result = await this.db.updateTable('accounts').set({ deletion_grace_days: days }).where('id', '=', accountId).executeTakeFirst();
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
        append_only: key.appendOnly ? 1 : 0,
        minted_fresh_at: key.mintedFreshAt ?? null,
        label: key.label ?? null,
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

  // ---- the sign-in rules both realms share (owners: login_links, sessions; the operator: operator_*) ----

  /**
   * A link's single use: one conditional UPDATE, so of two concurrent uses (on any nodes) exactly one matches the
   * row; unknown, used or expired: undefined.
   */
  private async consumeLinkIn<T extends 'login_links' | 'operator_login_links'>(
    table: T,
    tokenHash: string,
    now: number,
  ): Promise<Selectable<Database[T]> | undefined> {
    // The two tables share these columns; Kysely types one of them (the cast names the table's own row type back).
    const row = await this.db
      .updateTable(table as 'login_links')
      .set({ used_at: now })
      .where('token_hash', '=', tokenHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .returningAll()
      .executeTakeFirst();
    return row as Selectable<Database[T]> | undefined;
  }

  private async findSessionIn<T extends 'sessions' | 'operator_sessions'>(
    table: T,
    tokenHash: string,
  ): Promise<Selectable<Database[T]> | undefined> {
    const row = await this.db
      .selectFrom(table as 'sessions')
      .selectAll()
      .where('token_hash', '=', tokenHash)
      .executeTakeFirst();
    return row as Selectable<Database[T]> | undefined;
  }

  /** Revokes a live session once (a revoked one keeps its first revocation time); false: unknown or already revoked. */
  private async revokeSessionIn(table: 'sessions' | 'operator_sessions', sessionId: string, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable(table as 'sessions')
      .set({ revoked_at: at })
      .where('id', '=', sessionId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async consumeLoginLink(tokenHash: string, now: number): Promise<LoginLink | undefined> {
    const row = await this.consumeLinkIn('login_links', tokenHash, now);
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
        fresh_at: session.freshAt,
      })
      .execute();
  }

  async findSessionByHash(tokenHash: string): Promise<Session | undefined> {
    const row = await this.findSessionIn('sessions', tokenHash);
    return row && toSession(row);
  }

  revokeSession(sessionId: string, at: number): Promise<boolean> {
    return this.revokeSessionIn('sessions', sessionId, at);
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
    const operatorLinks = await this.db
      .deleteFrom('operator_login_links')
      .where((eb) => eb.or([eb('expires_at', '<', before), eb('used_at', '<', before)]))
      .executeTakeFirst();
    const operatorSessions = await this.db
      .deleteFrom('operator_sessions')
      .where((eb) => eb.or([eb('expires_at', '<', before), eb('revoked_at', '<', before)]))
      .executeTakeFirst();
    return [links, sessions, operatorLinks, operatorSessions].reduce((sum, r) => sum + Number(r.numDeletedRows), 0);
  }

  async createOperatorLink(link: OperatorLink, tokenHash: string): Promise<void> {
    await this.db
      .insertInto('operator_login_links')
      .values({
        id: link.id,
        operator: link.operator,
        token_hash: tokenHash,
        created_at: link.createdAt,
        expires_at: link.expiresAt,
        used_at: link.usedAt,
      })
      .execute();
  }

  async consumeOperatorLink(tokenHash: string, now: number): Promise<OperatorLink | undefined> {
    const row: Selectable<OperatorLoginLinksTable> | undefined = await this.consumeLinkIn('operator_login_links', tokenHash, now);
    return (
      row && {
        id: row.id,
        operator: row.operator,
        createdAt: num(row.created_at),
        expiresAt: num(row.expires_at),
        usedAt: numOrNull(row.used_at),
      }
    );
  }

  async createOperatorSession(session: OperatorSession, tokenHash: string): Promise<void> {
    await this.db
      .insertInto('operator_sessions')
      .values({
        id: session.id,
        operator: session.operator,
        token_hash: tokenHash,
        created_at: session.createdAt,
        expires_at: session.expiresAt,
        revoked_at: session.revokedAt,
      })
      .execute();
  }

  async findOperatorSessionByHash(tokenHash: string): Promise<OperatorSession | undefined> {
    const row: Selectable<OperatorSessionsTable> | undefined = await this.findSessionIn('operator_sessions', tokenHash);
    return (
      row && {
        id: row.id,
        operator: row.operator,
        createdAt: num(row.created_at),
        expiresAt: num(row.expires_at),
        revokedAt: numOrNull(row.revoked_at),
      }
    );
  }

  revokeOperatorSession(sessionId: string, at: number): Promise<boolean> {
    return this.revokeSessionIn('operator_sessions', sessionId, at);
  }

  async appliedMigrations(): Promise<string[]> {
    // Kysely's bookkeeping table, in the store's schema (see migrate()).
    const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(this.db);
    return rows.map((row) => row.name);
  }

  async getVault(accountId: string): Promise<Vault | undefined> {
    const [row] = await this.read('getVault', [accountId], (db) => db.selectFrom('vaults').selectAll().where('account_id', '=', accountId));
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

  async replaceVault(
    accountId: string,
    vault: Vault,
    { keep, expected }: { keep?: VaultKeep | undefined; expected?: Vault | undefined } = {},
  ): Promise<boolean> {
    const { account_id: _, ...columns } = vaultRow(accountId, vault);
    const replace = async (db: Kysely<Database>) => {
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
    if (!keep) return replace(this.db);
    const notReplaced = new Error('not replaced');
    return this.db
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
    const remove = async (db: Kysely<Database>) => {
      const result = await db.deleteFrom('vaults').where('account_id', '=', accountId).executeTakeFirst();
      return Number(result.numDeletedRows) > 0;
    };
    if (!keep) return remove(this.db);
    return this.db.transaction().execute(async (trx) => {
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
  private async keepVault(trx: Transaction<Database>, accountId: string, keep: VaultKeep): Promise<boolean> {
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
    const rows = await this.db
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
    return this.db.transaction().execute(async (trx) => {
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
    const result = await this.db.deleteFrom('vault_history').where('expires_at', '<=', now).executeTakeFirst();
    return Number(result.numDeletedRows);
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
      const [vault] = await this.cached(trx, 'reads', 'createBackup/vault', [accountId], (db) =>
        db.selectFrom('vaults').select('account_id').where('account_id', '=', accountId),
      );
      const [inFlight] = await this.cached(
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
        await this.cached(trx, 'writes', `insertBackup/${columns.join(',')}`, Object.values(row), (db) =>
          db.insertInto('backups').values(row),
        );
      }
      return decision;
    });
  }

  /** Locks the row of the fleet's owner (the account itself when it is not a host account) and returns it. */
  private async lockFleet(trx: Transaction<Database>, accountId: string): Promise<Account> {
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

  private async lockAccount(trx: Transaction<Database>, accountId: string): Promise<Account> {
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

  updateBackup(id: string, condition: BackupCondition, patch: BackupPatch, releaseUpload?: string): Promise<Backup | undefined> {
    if (releaseUpload === undefined) return this.conditionalUpdate(this.db, id, condition, patch);
    // One commit for both (SQLite: one WAL fsync on the event loop instead of two; bench P8).
    return this.db.transaction().execute(async (trx) => {
      const backup = await this.conditionalUpdate(trx, id, condition, patch);
      await this.deleteReservation(trx, releaseUpload);
      return backup;
    });
  }

  markReady(id: string, condition: BackupCondition, patch: BackupPatch): Promise<Backup | undefined> {
    return this.db.transaction().execute(async (trx) => {
      const backup = await this.conditionalUpdate(trx, id, condition, { ...patch, status: 'READY' });
      if (backup) {
        const { accountId, createdAt } = backup;
        await this.cached(trx, 'writes', 'markReady/account', [createdAt, accountId, createdAt], (db) =>
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
    db: Kysely<Database>,
    id: string,
    condition: BackupCondition,
    patch: BackupPatch,
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
    const [row] = await this.cached(db, 'writes', key, parameters, (db) => {
      let query = db.updateTable('backups').set(set).where('id', '=', id).where('status', 'in', statuses);
      if (ciphertextSizeBytes !== undefined) query = query.where('ciphertext_size_bytes', '=', ciphertextSizeBytes);
      if (scheduled !== undefined) {
        const { dueAfter, dueBy } = scheduled;
        query = query.where('purge_after', 'is not', null);
        if (dueAfter !== undefined) query = query.where('purge_after', '>', dueAfter);
        if (dueBy !== undefined) query = query.where('purge_after', '<=', dueBy);
      }
      return query.returningAll();
    });
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
          eb('status', '=', 'FAILED'),
          // A delete under way (crash recovery), or one whose grace has ended.
          eb.and([eb('status', '=', 'DELETING'), eb.or([eb('purge_after', 'is', null), eb('purge_after', '<=', now)])]),
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

  async appendAudit(entry: AuditEntry, keep: number): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('audit_events')
        .values({
          id: entry.id,
          account_id: entry.accountId,
          at: entry.at,
          action: entry.action,
          outcome: entry.outcome,
          actor_kind: entry.actor.kind,
          actor_id: entry.actor.id,
          address: entry.address,
          target: entry.target,
          detail: entry.detail,
        })
        .execute();
      // The bound: of this account's entries with the same outcome, everything older than the newest `keep` goes.
      // The oldest entry to drop is found on the (account_id, at, id) index, an index walk, not a scan.
      const oldestDropped = await trx
        .selectFrom('audit_events')
        .select(['at', 'id'])
        .where('account_id', '=', entry.accountId)
        .where('outcome', '=', entry.outcome)
        .orderBy('at', 'desc')
        .orderBy('id', 'desc')
        .limit(1)
        .offset(keep)
        .executeTakeFirst();
      if (oldestDropped) {
        const at = num(oldestDropped.at);
        await trx
          .deleteFrom('audit_events')
          .where('account_id', '=', entry.accountId)
          .where('outcome', '=', entry.outcome)
          .where((eb) => eb.or([eb('at', '<', at), eb.and([eb('at', '=', at), eb('id', '<=', oldestDropped.id)])]))
          .execute();
      }
    });
  }

  async listAudit(accountId: string, limit: number): Promise<AuditEntry[]> {
    const rows = await this.db
      .selectFrom('audit_events')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toAuditEntry);
  }

  async countSignInAttempt(address: string, now: number, windowMs: number): Promise<{ count: number; windowStart: number }> {
    // One INSERT … ON CONFLICT DO UPDATE: the row is locked while it is counted, so concurrent attempts on any nodes
    // each add one. Both SET expressions read the row as it was (a window that ended restarts at 1, now).
    const ended = sql<boolean>`signin_attempts.window_start + ${windowMs} <= ${now}`;
    const row = await this.db
      .insertInto('signin_attempts')
      .values({ address, window_start: now, count: 1 })
      .onConflict((oc) =>
        oc.column('address').doUpdateSet({
          count: sql<number>`case when ${ended} then 1 else signin_attempts.count + 1 end`,
          window_start: sql<number>`case when ${ended} then ${now} else signin_attempts.window_start end`,
        }),
      )
      .returning(['count', 'window_start'])
      .executeTakeFirstOrThrow();
    return { count: num(row.count), windowStart: num(row.window_start) };
  }

  async pruneSignInAttempts(before: number): Promise<number> {
    const result = await this.db.deleteFrom('signin_attempts').where('window_start', '<', before).executeTakeFirst();
    return Number(result.numDeletedRows);
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

  async putSetting(name: string, value: string, now: number): Promise<void> {
    await this.db
      .insertInto('settings')
      .values({ name, value, created_at: now })
      .onConflict((oc) => oc.column('name').doUpdateSet({ value, created_at: now }))
      .execute();
  }

  async getSetting(name: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('settings').select('value').where('name', '=', name).executeTakeFirst();
    return row?.value;
  }

  async addMultipartUpload(backupId: string, uploadId: string, now: number): Promise<number> {
    await this.db.insertInto('blobhost_uploads').values({ upload_id: uploadId, backup_id: backupId, created_at: now }).execute();
    return this.countMultipartUploads(backupId);
  }

  async countMultipartUploads(backupId: string): Promise<number> {
    const row = await this.db
      .selectFrom('blobhost_uploads')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('backup_id', '=', backupId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async putPartSize(backupId: string, uploadId: string, partNumber: number, size: number): Promise<number> {
    await this.db
      .insertInto('blobhost_parts')
      .values({ upload_id: uploadId, part_number: partNumber, backup_id: backupId, size })
      .onConflict((oc) => oc.columns(['upload_id', 'part_number']).doUpdateSet({ size, backup_id: backupId }))
      .execute();
    return this.slotBytes(backupId);
  }

  async slotBytes(backupId: string, except?: { uploadId: string; partNumber: number }): Promise<number> {
    let query = this.db
      .selectFrom('blobhost_parts')
      .select((eb) => eb.fn.sum<number | string | null>('size').as('total'))
      .where('backup_id', '=', backupId);
    if (except) {
      query = query.where((eb) => eb.or([eb('upload_id', '!=', except.uploadId), eb('part_number', '!=', except.partNumber)]));
    }
    const row = await query.executeTakeFirstOrThrow();
    return Number(row.total ?? 0);
  }

  async removeMultipartUpload(uploadId: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('blobhost_parts').where('upload_id', '=', uploadId).execute();
      await trx.deleteFrom('blobhost_uploads').where('upload_id', '=', uploadId).execute();
    });
  }

  async pruneMultipartUploads(): Promise<number> {
    return this.db.transaction().execute(async (trx) => {
      const pending = trx.selectFrom('backups').select('id').where('status', '=', 'PENDING_UPLOAD');
      await trx.deleteFrom('blobhost_parts').where('backup_id', 'not in', pending).execute();
      const result = await trx.deleteFrom('blobhost_uploads').where('backup_id', 'not in', pending).executeTakeFirst();
      return Number(result.numDeletedRows);
    });
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
