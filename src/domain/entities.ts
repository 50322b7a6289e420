/**
 * The records Coffer keeps, as the services and the routes know them: the persistence ports (src/store/ports/) store
 * and return these, and nothing above the store sees a row.
 */
import type { BackupStatus } from './backups.js';
import type { Plan } from './plans.js';
import type { Scope } from './scopes.js';

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
  /**
   * S3 Object Lock (docs/deploy.md#object-lock): until when the store refuses to remove the ciphertext (epoch ms); null:
   * not locked. A DELETED record keeps it while its object waits for the lock to end.
   */
  lockedUntil: number | null;
  /** The version of the object Coffer wrote at blobKey (a versioned bucket), which it reads and removes; null: none. */
  blobVersion: string | null;
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
