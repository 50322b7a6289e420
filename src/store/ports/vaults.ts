/** Vault envelopes and the history of replaced ones. */
import type { Vault, VaultChange, VaultHistoryEntry } from '../../domain/entities.js';

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

export interface VaultStore {
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
}
