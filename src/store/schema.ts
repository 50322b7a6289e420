import type { Generated } from 'kysely';

/** Table shapes as Kysely sees them. Times are epoch milliseconds; booleans never stored. */
export interface AccountsTable {
  id: string;
  plan: string;
  created_at: number;
  last_ready_created_at: number | null;
  /** Migration 0005; defaults to 0. */
  deletion_grace_days: Generated<number>;
  /** Migration 0011: 1 when the account has its own quota (quota_bytes; null there: no quota); 0: the plan's. */
  quota_override: Generated<number>;
  quota_bytes: number | null;
  /** Migration 0010: the owner account of a host account; null for an ordinary account. */
  owner_account_id: string | null;
  /** Migration 0010: a host account's label, given by its owner. */
  label: string | null;
  /** Migration 0014: the operator's name for the account; null: none. */
  operator_label: string | null;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  key_hash: string;
  scopes: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  /** 1: the key may not delete, reset, rotate or re-bootstrap (migration 0004). */
  append_only: number;
  /** For a key made in a console session: that session's fresh sign-in time (migration 0008); null otherwise. */
  minted_fresh_at: number | null;
  /** The owner's name for the key (migration 0009); null: none. */
  label: string | null;
}

export interface VaultsTable {
  account_id: string;
  crypto_version: string;
  kdf_salt: string;
  kdf_opslimit: number;
  kdf_memlimit: number;
  wrapped_master_key: string;
  wrapped_master_key_nonce: string;
  updated_at: number;
  /** When the vault was first stored (null for vaults stored before migration 0003). */
  created_at: number | null;
}

export interface BackupsTable {
  id: string;
  account_id: string;
  status: string;
  created_at: number;
  expires_at: number;
  updated_at: number;
  blob_path: string;
  blob_key: string | null;
  ciphertext_size_bytes: number | null;
  plaintext_size_bytes: number | null;
  client_version: string | null;
  hostapp_version: string | null;
  crypto_version: string;
  wrapped_dek: string | null;
  wrapped_dek_nonce: string | null;
  encrypted_metadata: string | null;
  encrypted_metadata_nonce: string | null;
  deleted_at: number | null;
  /** Migration 0005: DELETING in its grace until then. */
  purge_after: number | null;
  /** Migration 0016: the store refuses to remove the object before then (S3 Object Lock); null: not locked. */
  locked_until: number | null;
  /** Migration 0016: the version of the object Coffer wrote (versioned buckets); null: unversioned. */
  blob_version: string | null;
}

export interface SettingsTable {
  name: string;
  value: string;
  created_at: number;
}

/** One-time console sign-in links (`coffer admin login-link`); only a hash of the token is stored. */
export interface LoginLinksTable {
  id: string;
  account_id: string;
  token_hash: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

/** The operator console's one-time links (`coffer admin login-link --operator`, migration 0013); hashes only. */
export interface OperatorLoginLinksTable {
  id: string;
  operator: string | null;
  token_hash: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

/** The operator console's sessions (migration 0013); only a hash of the cookie secret is stored. */
export interface OperatorSessionsTable {
  id: string;
  operator: string | null;
  token_hash: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

/** Console browser sessions; only a hash of the cookie secret is stored. */
export interface SessionsTable {
  id: string;
  account_id: string;
  token_hash: string;
  /** The API key the session was opened with (the session ends with it), or null for a login link. */
  key_id: string | null;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
  /** When the sign-in behind the session happened, for the fresh-sign-in rule (migration 0008; null: created_at). */
  fresh_at: number | null;
}

/** Previous vault envelopes (migration 0005), kept for the account's deletion grace. */
export interface VaultHistoryTable {
  id: string;
  account_id: string;
  crypto_version: string;
  kdf_salt: string;
  kdf_opslimit: number;
  kdf_memlimit: number;
  wrapped_master_key: string;
  wrapped_master_key_nonce: string;
  /** When the envelope was stored (its updated_at while it was current). */
  stored_at: number;
  created_at: number | null;
  replaced_at: number;
  replaced_by: string;
  reason: string;
  expires_at: number;
}

/** The audit trail (migration 0004): one row per recorded action, at most AUDIT_MAX_ENTRIES per account and outcome. */
export interface AuditEventsTable {
  id: string;
  account_id: string;
  at: number;
  action: string;
  outcome: string;
  actor_kind: string;
  actor_id: string | null;
  address: string | null;
  target: string | null;
  detail: string | null;
}

/** The blob host's open multipart uploads (migration 0007), one row per upload, until completed or aborted. */
export interface BlobhostUploadsTable {
  upload_id: string;
  backup_id: string;
  created_at: number;
}

/** The sizes of the parts the blob host stored for an open multipart upload (migration 0007). */
export interface BlobhostPartsTable {
  upload_id: string;
  part_number: number;
  backup_id: string;
  size: number;
}

/** Bytes reserved by uploads in progress (migration 0011), counted in the account's stored bytes until they end. */
export interface UploadReservationsTable {
  id: string;
  account_id: string;
  backup_id: string;
  bytes: number;
  /** A reservation left by a node that died mid-upload stops counting then (the slot's own expiry). */
  expires_at: number;
}

/** Console sign-in attempts per client address in the current fixed window (counted across nodes). */
export interface SignInAttemptsTable {
  address: string;
  window_start: number;
  count: number;
}

/** Migration 0017: restore drills' attestations, stored as their clients authenticated them. */
export interface RestoreAttestationsTable {
  id: string;
  /** The account that holds the backup (a host account's backup: the host account). */
  account_id: string;
  backup_id: string;
  /** The server's clock when it was recorded. */
  recorded_at: number;
  /** The API key that recorded it. */
  recorded_by: string;
  /** Read from the payload (the drilling machine's clock); not checked by the server. */
  checked_at: number;
  /** Read from the payload: 'passed' or 'failed'; not checked by the server. */
  result: string;
  /** Base64 of the payload bytes, as sent. */
  payload: string;
  /** Base64 of the 32-byte HMAC, as sent. */
  mac: string;
}

export interface Database {
  settings: SettingsTable;
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  vaults: VaultsTable;
  backups: BackupsTable;
  login_links: LoginLinksTable;
  sessions: SessionsTable;
  operator_login_links: OperatorLoginLinksTable;
  operator_sessions: OperatorSessionsTable;
  vault_history: VaultHistoryTable;
  audit_events: AuditEventsTable;
  blobhost_uploads: BlobhostUploadsTable;
  blobhost_parts: BlobhostPartsTable;
  upload_reservations: UploadReservationsTable;
  signin_attempts: SignInAttemptsTable;
  restore_attestations: RestoreAttestationsTable;
}
