/**
 * The vault's life (docs/api-rules.md#account): bootstrap, rotate (conditional with If-Match), reset, and the history
 * of replaced envelopes (kept for the account's deletion grace, restorable). An owner's change of envelope is followed
 * by every host account that still shares it.
 */
import { createHash } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { historyActor, type Actor } from '../domain/audit.js';
import { VAULT_HISTORY_LIMIT, vaultHistoryExpiresAt } from '../domain/backups.js';
import type { Clock } from '../domain/clock.js';
import type { Account, Vault, VaultChange, VaultHistoryEntry } from '../domain/entities.js';
import { AppError } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import type { VaultEnvelope } from '../domain/vault-input.js';
import type { Stores } from '../store/ports/stores.js';
import type { VaultKeep } from '../store/ports/vaults.js';
import { binaryIssues } from './binary-fields.js';
import { VISIBLE_STATUSES, type RetentionService } from './retention.js';

/** A parsed If-Match header: "*" (any current vault) or the strong entity tags, quotes included. */
export type IfMatch = '*' | string[];

/**
 * The strong validator of the vault material (the ETag of GET /api/backup-account): SHA-256 over the stored envelope
 * fields, so it changes with every rotate (a new salt and nonce each time) and needs no column of its own.
 */
export function vaultEtag(vault: Vault): string {
  let etag = etags.get(vault);
  if (etag === undefined) {
    const { cryptoVersion, kdf, wrappedMasterKey, wrappedMasterKeyNonce } = vault;
    const material = JSON.stringify([cryptoVersion, kdf.salt, kdf.opslimit, kdf.memlimit, wrappedMasterKey, wrappedMasterKeyNonce]);
    etag = `"vault-${createHash('sha256').update(material).digest('base64url')}"`;
    // A frozen vault (as the metadata cache hands out) cannot change: its ETag is computed once.
    if (Object.isFrozen(vault) && Object.isFrozen(kdf)) etags.set(vault, etag);
  }
  return etag;
}

const etags = new WeakMap<Vault, string>();

export interface AccountView {
  account: Account;
  vault: Vault | undefined;
}

export class VaultService {
  constructor(
    private readonly ports: Pick<Stores, 'vaults' | 'accounts' | 'backups'>,
    private readonly retention: RetentionService,
    private readonly clock: Clock,
  ) {}

  async accountView(accountId: string): Promise<AccountView> {
    const account = await this.ports.accounts.getAccount(accountId);
    if (!account) throw new Error(`account ${accountId} vanished`);
    return { account, vault: await this.ports.vaults.getVault(accountId) };
  }

  private checkEnvelope(envelope: VaultEnvelope): Vault {
    const issues = binaryIssues({ salt: envelope.kdf.salt }, 'kdf.').concat(
      binaryIssues({
        wrappedMasterKey: envelope.wrappedMasterKey,
        wrappedMasterKeyNonce: envelope.wrappedMasterKeyNonce,
      }),
    );
    if (issues.length > 0) throw AppError.validation(issues);
    return { ...envelope, kdf: { ...envelope.kdf }, updatedAt: this.clock.now() };
  }

  async bootstrap(accountId: string, envelope: VaultEnvelope): Promise<AccountView & { created: boolean }> {
    const created = await this.ports.vaults.createVault(accountId, this.checkEnvelope(envelope));
    return { ...(await this.accountView(accountId)), created };
  }

  /**
   * Replaces the vault material; the replaced envelope is kept in the vault history for the account's deletion grace.
   * With `ifMatch` (the If-Match header: "*" or the entity tags the client accepts) the rotate is conditional: it
   * happens only while the stored material is the one whose ETag (vaultEtag) the client names, checked and written
   * in one compare-and-swap statement, else `409 vault_changed` and nothing changes (docs/api-rules.md#account).
   * Without it, the rotate is unconditional.
   */
  async rotate(
    accountId: string,
    envelope: VaultEnvelope,
    actor: Actor,
    ifMatch?: IfMatch,
  ): Promise<AccountView & { rotated: true; historyDays: number }> {
    const vault = this.checkEnvelope(envelope);
    const graceDays = await this.retention.graceDays(accountId);
    const keep = this.keep('rotate', actor, graceDays);
    const missing = () => new AppError('vault_not_initialized', 'There is no vault to rotate.');
    // The envelope being replaced: the compare-and-swap's expectation with If-Match, and what host accounts follow.
    const previous = await this.ports.vaults.getVault(accountId);
    let expected: Vault | undefined;
    if (ifMatch !== undefined) {
      expected = previous;
      if (!expected) throw missing();
    }
    const matches = ifMatch === undefined || ifMatch === '*' || ifMatch.includes(vaultEtag(expected!));
    if (!matches || !(await this.ports.vaults.replaceVault(accountId, vault, { keep, expected }))) {
      // Changed before the check, or between the check and the write: say what it is now.
      const now = await this.ports.vaults.getVault(accountId);
      if (!now) throw missing();
      throw new AppError('vault_changed', 'The vault material was changed since it was read: If-Match does not name its current ETag.', {
        currentEtag: vaultEtag(now),
      });
    }
    await this.followOwner(accountId, previous, vault);
    return { ...(await this.accountView(accountId)), rotated: true, historyDays: graceDays };
  }

  /** How to keep a replaced envelope for `graceDays` (undefined: not kept, the grace is 0). */
  private keep(reason: VaultChange, actor: Actor, graceDays: number): VaultKeep | undefined {
    const now = this.clock.now();
    const expiresAt = vaultHistoryExpiresAt(graceDays, now);
    if (expiresAt === null) return undefined;
    return { id: uuidv7(), replacedAt: now, replacedBy: historyActor(actor), reason, expiresAt, limit: VAULT_HISTORY_LIMIT };
  }

  async reset(accountId: string, deleteBackups: boolean, actor: Actor) {
    await this.retention.sweep(accountId);
    const remaining = await this.ports.backups.listBackups(accountId, VISIBLE_STATUSES);
    if (remaining.length > 0 && !deleteBackups) {
      throw new AppError('vault_not_empty', 'The account still has backups.', {
        remainingBackups: remaining.length,
      });
    }
    const graceDays = await this.retention.graceDays(accountId);
    let deletedBackups = 0;
    for (const backup of remaining) {
      if (await this.retention.deleteRecord(backup, graceDays)) deletedBackups += 1;
    }
    const accountDeleted = await this.ports.vaults.deleteVault(accountId, this.keep('reset', actor, graceDays));
    return { reset: true, accountDeleted, deletedBackups };
  }

  /** The account's kept vault envelopes, newest first. */
  vaultHistory(accountId: string): Promise<VaultHistoryEntry[]> {
    return this.ports.vaults.listVaultHistory(accountId, this.clock.now());
  }

  /**
   * Makes a kept envelope the vault again. The envelope it replaces is kept in turn (for the grace, and at least a
   * day), so a restore can itself be undone.
   */
  async restoreVault(accountId: string, entryId: string, actor: Actor): Promise<Vault> {
    const graceDays = Math.max(1, await this.retention.graceDays(accountId));
    const previous = await this.ports.vaults.getVault(accountId);
    const restored = isUuid(entryId)
      ? await this.ports.vaults.restoreVault(accountId, entryId, this.clock.now(), this.keep('restore', actor, graceDays))
      : undefined;
    if (!restored) throw new AppError('not_found', 'No such envelope in the vault history (it may have expired).');
    await this.followOwner(accountId, previous, restored);
    return restored;
  }

  /** Deletes kept envelopes whose time is up. */
  pruneVaultHistory(): Promise<number> {
    return this.ports.vaults.pruneVaultHistory(this.clock.now());
  }

  /**
   * After the owner's envelope changed from `before` to `after`: the same change on every host account that still
   * held `before` (compare-and-swap per account, so a host account whose vault diverged is left alone).
   */
  private async followOwner(ownerAccountId: string, before: Vault | undefined, after: Vault): Promise<void> {
    if (!before) return;
    for (const host of await this.ports.accounts.listHostAccounts(ownerAccountId)) {
      const current = await this.ports.vaults.getVault(host.id);
      if (current && vaultEtag(current) === vaultEtag(before)) {
        await this.ports.vaults.replaceVault(host.id, after, { expected: current });
      }
    }
  }
}
