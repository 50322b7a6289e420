/** The metadata store: one interface, one implementation per engine (SQLite embedded, PostgreSQL scale-out). */
import type { AuditEntry } from '../domain/audit.js';
import type { BackupStatus, CreateDecision, CreateSnapshot } from '../domain/backups.js';
import type { Plan } from '../domain/plans.js';
import type { Scope } from '../domain/scopes.js';

export interface Account {
  id: string;
  plan: Plan;
  createdAt: number;
  lastReadyCreatedAt: number | null;
  /** Days a deleted READY backup stays restorable (0: deletes remove the ciphertext at once). 0 when absent. */
  deletionGraceDays?: number;
  /**
   * The account's own quota (null: none); absent: its plan's (docs/api-rules.md#quota). An owner's quota is its
   * fleet's: it covers the owner and every host account it made (a host account's own is never read).
   */
  quotaOverride?: number | null;
  /**
   * A host account (migration 0010): the owner account it belongs to. Its owner's non-append-only credentials may read
   * (list, get, download) its backups, and the owner's vault changes are copied to it (docs/client.md#hosts-with-their-own-schedule).
   * It is on its owner's plan (setPlan changes both) and stores under its owner's quota (the fleet's one budget).
   * Null or absent for an ordinary account.
   */
  ownerAccountId?: string | null;
  /** A host account's name as its owner gave it (e.g. "web"); null or absent otherwise. */
  label?: string | null;
  /** The operator's name for the account (`coffer admin accounts set-label`); absent: none. */
  operatorLabel?: string;
}

/** One account's storage, counts and freshness, as the operator sees it: sizes, times and counts, nothing else. */
export interface AccountUsageRow {
  accountId: string;
  /** A host account's owner (its fleet's quota is the owner's); null for an owner or an ordinary account. */
  ownerAccountId: string | null;
  /** A host account's name as its owner gave it; null otherwise. */
  hostLabel: string | null;
  plan: Plan;
  createdAt: number;
  /** The account's own quota (null: none); absent: its plan's. */
  quotaOverride?: number | null;
  /** Ciphertext of READY and UPLOADED backups, of backups in their deletion grace, and bytes reserved by uploads. */
  storedBytes: number;
  /** READY backups. */
  backups: number;
  /** Backups deleted but still restorable (DELETING in their deletion grace). */
  graceBackups: number;
  /** Uploads in progress (PENDING_UPLOAD, UPLOADED). */
  uploadingBackups: number;
  /** READY or DELETING backups created at or after usage()'s `since` (0 without it). */
  createdSince: number;
  lastReadyAt: number | null;
}

/** What counts against one quota: an owner (or ordinary account) and every host account it made. */
export interface FleetUsage {
  /** The fleet's owner: its plan and own quota give the fleet's quota. */
  owner: Account;
  /** What the whole fleet stores now, as AccountUsageRow.storedBytes counts it for each account. */
  storedBytes: number;
  /** Accounts in the fleet: the owner and its host accounts. */
  accounts: number;
}

/** An upload's reservation of bytes against the account's quota. */
export interface UploadReservation {
  id: string;
  accountId: string;
  backupId: string;
  expiresAt: number;
}

/** What reserveUpload decided: the bytes reserved, or the quota and usage that left no room. */
export type ReserveResult = { reserved: number } | { reserved: null; quota: number; usage: number };

export interface Vault {
  cryptoVersion: 'v1';
  kdf: { salt: string; opslimit: number; memlimit: number };
  wrappedMasterKey: string;
  wrappedMasterKeyNonce: string;
  updatedAt: number;
  /** When the vault was first stored (kept by rotations); absent for vaults stored before it was recorded. */
  createdAt?: number;
}

export interface ApiKey {
  id: string;
  accountId: string;
  scopes: Scope[];
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  /** May not delete, reset, rotate or bootstrap over a vault (src/domain/append-only.ts); set when the key is made. */
  appendOnly: boolean;
  /** The owner's name for the key ("laptop"), set when it is made (domain/keys.ts keyLabelProblem); null: none. */
  label?: string | null;
  /**
   * For a key made in a console session: the `freshAt` of that session. A session opened with the key is no fresher
   * than it (domain/backups.ts isFreshSignIn), so a stale session cannot renew itself by minting a key.
   */
  mintedFreshAt?: number;
}

/** A one-time console sign-in link (its token is known only by hash). */
export interface LoginLink {
  id: string;
  accountId: string;
  createdAt: number;
  expiresAt: number;
  usedAt: number | null;
}

/** A console browser session (its cookie secret is known only by hash). */
export interface Session {
  id: string;
  accountId: string;
  /** The API key the session was opened with, or null when it was opened with a login link. */
  keyId: string | null;
  createdAt: number;
  expiresAt: number;
  revokedAt: number | null;
  /**
   * When the sign-in behind this session happened, for the fresh-sign-in rule: its creation, or, for a session
   * opened with a key made in another session, that session's freshAt (whichever is earlier).
   */
  freshAt: number;
}

/** A one-time link to the operator console (`coffer admin login-link --operator`); its token is known only by hash. */
export interface OperatorLink {
  id: string;
  /** Who made it: the OS user that ran `coffer admin`, when it could be told. */
  operator: string | null;
  createdAt: number;
  expiresAt: number;
  usedAt: number | null;
}

/** An operator console session: no account, no key; it reads usage and changes plans, never an owner's data. */
export interface OperatorSession {
  id: string;
  operator: string | null;
  createdAt: number;
  expiresAt: number;
  revokedAt: number | null;
}

export interface Backup {
  id: string;
  accountId: string;
  status: BackupStatus;
  createdAt: number;
  expiresAt: number;
  updatedAt: number;
  blobPath: string;
  /** Where the uploaded ciphertext lives in the BlobStore; unique per upload attempt. */
  blobKey: string | null;
  ciphertextSizeBytes: number | null;
  plaintextSizeBytes: number | null;
  clientVersion: string | null;
  hostappVersion: string | null;
  cryptoVersion: 'v1';
  wrappedDek: string | null;
  wrappedDekNonce: string | null;
  encryptedMetadata: string | null;
  encryptedMetadataNonce: string | null;
  deletedAt: number | null;
  /** DELETING in its deletion grace: when the ciphertext goes (until then the owner may restore it); else null. */
  purgeAfter: number | null;
}

export type BackupPatch = Partial<Omit<Backup, 'id' | 'accountId' | 'createdAt' | 'blobPath'>>;

export interface BackupCondition {
  statuses: readonly BackupStatus[];
  ciphertextSizeBytes?: number;
  /** Only a record scheduled for deletion (purgeAfter set), due after `dueAfter` and/or by `dueBy` (inclusive). */
  scheduled?: { dueAfter?: number; dueBy?: number };
}

/** Why a vault envelope was replaced (and kept in the history). */
export type VaultChange = 'rotate' | 'reset' | 'restore';

/** A previous vault envelope, kept for the deletion grace so the owner can roll a rotate or reset back. */
export interface VaultHistoryEntry {
  id: string;
  accountId: string;
  /** The envelope as it was (its updatedAt: when it was stored). */
  vault: Vault;
  replacedAt: number;
  /** Who replaced it: an API key id, or `session:<id>` for a console session. */
  replacedBy: string;
  reason: VaultChange;
  expiresAt: number;
}

/** How to keep the current envelope in the history when it is replaced or removed (same transaction). */
export interface VaultKeep {
  id: string;
  replacedAt: number;
  replacedBy: string;
  reason: VaultChange;
  expiresAt: number;
  /** Entries kept per account at most: beyond it, the oldest `limit - 1` and the newest stay, those between go. */
  limit: number;
}

/** Statements a store has sent since it was opened (monotonic; a benchmark or /metrics reads the deltas). */
export interface QueryCounts {
  reads: number;
  writes: number;
  other: number;
}

/** What Store.peekApiKeyByHash answers when it cannot tell without a read (not cached, or no cache). */
export const NOT_CACHED = Symbol('not cached');

export interface Store {
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

  /**
   * Stores a new account. A host account (ownerAccountId set) takes its owner's plan, read under the owner's row lock
   * in the same transaction, so a plan change of the owner made meanwhile reaches it too; the stored account is returned.
   */
  createAccount(account: Account): Promise<Account>;
  getAccount(id: string): Promise<Account | undefined>;
  listAccounts(): Promise<Account[]>;
  /** The host accounts linked to `ownerAccountId`, oldest first. */
  listHostAccounts(ownerAccountId: string): Promise<Account[]>;
  /**
   * Sets the account's plan and its host accounts' (one transaction, the owner's row locked first, so a host account
   * added meanwhile is on the new plan too); false when there is no such account.
   */
  setPlan(accountId: string, plan: Plan): Promise<boolean>;
  /** Sets (or with null clears) the operator's name for the account; false when there is no such account. */
  setOperatorLabel(accountId: string, label: string | null): Promise<boolean>;
  /** Sets the account's deletion grace (days); false when there is no such account. */
  setDeletionGrace(accountId: string, days: number): Promise<boolean>;
  /** Sets the account's own quota (bytes, or null: none), or with undefined returns it to its plan's; false: no such account. */
  setQuota(accountId: string, quota: number | null | undefined): Promise<boolean>;
  /**
   * Storage, counts and freshness of every account (or one), at `now` (reservations expired by then do not count):
   * the one source of per-account numbers for quotas, `coffer admin usage`, /metrics and the operator console.
   * `since` bounds createdSince.
   */
  usage(now: number, accountId?: string, since?: number): Promise<AccountUsageRow[]>;
  /** The fleet `accountId` belongs to (its owner's, or its own) and what the whole fleet stores at `now`. */
  fleetUsage(now: number, accountId: string): Promise<FleetUsage | undefined>;
  /**
   * Reserves bytes for an upload against its fleet's quota, in one transaction holding the fleet owner's row lock, so
   * concurrent uploads of the owner and all its host accounts on any node see each other: `quotaOf` gives the quota
   * from the fleet's owner, `size` the bytes wanted for it and the fleet's usage (null quota: no limit). Stores and
   * returns the reservation, or says the quota and usage that refused it.
   */
  reserveUpload(
    reservation: UploadReservation,
    now: number,
    size: (quota: number | null, usage: number) => number | null,
    quotaOf: (account: Account) => number | null,
  ): Promise<ReserveResult>;
  /** Ends an upload's reservation (its bytes are now the backup's, or were never stored). */
  releaseUpload(id: string): Promise<void>;

  createApiKey(key: ApiKey, keyHash: string): Promise<void>;
  findApiKeyByHash(keyHash: string): Promise<ApiKey | undefined>;
  /**
   * findApiKeyByHash's answer without waiting, where the store already holds it (the metadata cache: bench P3), or
   * NOT_CACHED when only findApiKeyByHash can tell. A store without a cache has none.
   */
  peekApiKeyByHash?(keyHash: string): ApiKey | undefined | typeof NOT_CACHED;
  listApiKeys(accountId?: string): Promise<ApiKey[]>;
  getApiKey(keyId: string): Promise<ApiKey | undefined>;
  revokeApiKey(keyId: string, at: number): Promise<boolean>;

  createLoginLink(link: LoginLink, tokenHash: string): Promise<void>;
  /**
   * Uses a login link: marks it used when it is unused and unexpired at `now`, and returns it; undefined when it
   * is unknown, used or expired. Atomic, so two nodes never both accept one link.
   */
  consumeLoginLink(tokenHash: string, now: number): Promise<LoginLink | undefined>;
  createSession(session: Session, tokenHash: string): Promise<void>;
  findSessionByHash(tokenHash: string): Promise<Session | undefined>;
  /** Ends a session; false when it was unknown or already ended. */
  revokeSession(sessionId: string, at: number): Promise<boolean>;
  /**
   * Deletes login links that expired or were used before `before`, and sessions that expired or were signed out
   * before it or whose API key was revoked or expired before it; returns how many rows went.
   */
  pruneSessions(before: number): Promise<number>;

  // ---- the operator console's links and sessions (the same rules, src/services/sessions.ts; their own tables) ----
  createOperatorLink(link: OperatorLink, tokenHash: string): Promise<void>;
  /** Like consumeLoginLink, for operator links: atomic, single use. */
  consumeOperatorLink(tokenHash: string, now: number): Promise<OperatorLink | undefined>;
  createOperatorSession(session: OperatorSession, tokenHash: string): Promise<void>;
  findOperatorSessionByHash(tokenHash: string): Promise<OperatorSession | undefined>;
  revokeOperatorSession(sessionId: string, at: number): Promise<boolean>;

  /** Names of the schema migrations applied to this database, in order. */
  appliedMigrations(): Promise<string[]>;

  getVault(accountId: string): Promise<Vault | undefined>;
  /** Stores the vault unless one exists; true when it was created. */
  createVault(accountId: string, vault: Vault): Promise<boolean>;
  /**
   * Replaces an existing vault; false when there is none, or, with `expected`, when the stored material (crypto
   * version, KDF parameters, wrapped key and nonce) is no longer `expected`'s: a compare-and-swap in one statement.
   * With `keep`, the replaced envelope goes to the history (in the same transaction: nothing is kept when nothing is
   * replaced).
   */
  replaceVault(accountId: string, vault: Vault, options?: { keep?: VaultKeep | undefined; expected?: Vault | undefined }): Promise<boolean>;
  /** Removes the vault; true when one existed. With `keep`, the removed envelope goes to the history. */
  deleteVault(accountId: string, keep?: VaultKeep): Promise<boolean>;
  /** The account's kept envelopes not expired at `now`, newest first. */
  listVaultHistory(accountId: string, now: number): Promise<VaultHistoryEntry[]>;
  /**
   * Makes a kept envelope (unexpired at `now`) the vault again, stored at `updatedAt`, and removes it from the
   * history; the envelope it replaces (if any) is kept with `keep`. Atomic. Undefined when there is no such entry.
   */
  restoreVault(accountId: string, entryId: string, now: number, keep: VaultKeep | undefined): Promise<Vault | undefined>;
  /** Deletes kept envelopes that expired at `now`; returns how many. */
  pruneVaultHistory(now: number): Promise<number>;

  /**
   * Atomically reads the account's create snapshot at `now`, asks `decide`, and inserts `backup` when allowed.
   * Concurrent calls for one account are serialized by the database, so at most one is allowed.
   */
  createBackup(
    accountId: string,
    now: number,
    decide: (snapshot: CreateSnapshot) => CreateDecision,
    backup: Backup,
  ): Promise<CreateDecision>;
  getBackup(id: string): Promise<Backup | undefined>;
  /** The account's backups in the given statuses, newest first. */
  listBackups(accountId: string, statuses: readonly BackupStatus[]): Promise<Backup[]>;
  /**
   * Compare-and-set: applies `patch` only when the record matches `condition`; returns the new record. With
   * `releaseUpload`, that upload reservation also ends (releaseUpload) in the same commit, whether or not the update
   * applies.
   */
  updateBackup(id: string, condition: BackupCondition, patch: BackupPatch, releaseUpload?: string): Promise<Backup | undefined>;
  /** Like updateBackup to READY, and records the backup's createdAt as the account's last READY (cadence). */
  markReady(id: string, condition: BackupCondition, patch: BackupPatch): Promise<Backup | undefined>;
  /** Records needing sweeper action at `now` (expired in-flight, FAILED, expired READY, DELETING not in grace at `now`). */
  listSweepCandidates(now: number, accountId?: string): Promise<Backup[]>;
  /** The subset of `blobKeys` still referenced by a record that is not DELETED (orphan sweeping). */
  liveBlobKeys(blobKeys: readonly string[]): Promise<Set<string>>;

  /**
   * Stores an audit entry, then drops the account's oldest entries with the same outcome beyond the newest `keep`
   * (one transaction): refused attempts never push out what was done.
   */
  appendAudit(entry: AuditEntry, keep: number): Promise<void>;
  /** The account's audit entries, newest first, at most `limit`. */
  listAudit(accountId: string, limit: number): Promise<AuditEntry[]>;

  /**
   * Counts one console sign-in attempt from `address` in a fixed window of `windowMs` (a new window starts at `now`
   * when the last one has ended) and returns the attempts of the current window, this one included, and when that
   * window started. One atomic statement, so attempts on different nodes all count.
   */
  countSignInAttempt(address: string, now: number, windowMs: number): Promise<{ count: number; windowStart: number }>;
  /** Forgets the attempt windows that started before `before`; returns how many. */
  pruneSignInAttempts(before: number): Promise<number>;

  /** The stored value of a shared setting; stores `initial` first when there is none (first writer wins). */
  ensureSetting(name: string, initial: string, now: number): Promise<string>;
  /** Sets a shared setting, replacing any value it had (the last writer wins). */
  putSetting(name: string, value: string, now: number): Promise<void>;
  /** The stored value of a shared setting; undefined when none was stored. */
  getSetting(name: string): Promise<string | undefined>;

  // ---- the blob host's multipart uploads (src/services/blob-host.ts), counted here instead of listed in storage ----
  /** Records an open multipart upload of a slot; returns how many the slot now has open. */
  addMultipartUpload(backupId: string, uploadId: string, now: number): Promise<number>;
  /** How many multipart uploads the slot has open. */
  countMultipartUploads(backupId: string): Promise<number>;
  /** Records (or replaces) the size of a stored part; returns the bytes the slot's open uploads now hold together. */
  putPartSize(backupId: string, uploadId: string, partNumber: number, size: number): Promise<number>;
  /** Bytes the slot's open uploads hold together, leaving out one part (the one about to be replaced). */
  slotBytes(backupId: string, except?: { uploadId: string; partNumber: number }): Promise<number>;
  /** Forgets a multipart upload and its parts (completed or aborted). */
  removeMultipartUpload(uploadId: string): Promise<void>;
  /** Forgets the uploads of slots that take no upload any more (no longer PENDING_UPLOAD); returns how many. */
  pruneMultipartUploads(): Promise<number>;
  /**
   * Runs `task` only if no other holder of the lock `name` is running one: across every node for PostgreSQL
   * (an advisory lock), within this process for SQLite (an embedded, single-node database).
   */
  tryExclusive<T>(name: string, task: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }>;
}
