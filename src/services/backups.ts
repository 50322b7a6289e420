/** Backup and vault operations: the domain rules applied to the store, the blob store and the status bus. */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { v7 as uuidv7 } from 'uuid';
import type { BackupAccountEnvelopeBody, BackupFinalizeBody } from '../contract/schemas.js';
import {
  IN_FLIGHT_STATUSES,
  decideCreate,
  isRestorable,
  isVisible,
  purgeAfterFor,
  retentionExpiresAt,
  VAULT_HISTORY_LIMIT,
  vaultHistoryExpiresAt,
  MAX_DELETION_GRACE_DAYS,
  isDeletionGrace,
  secondsUntil,
  slotExpiresAt,
  sweepActionFor,
  BACKUP_STATUSES,
  type BackupStatus,
} from '../domain/backups.js';
import type { Clock } from '../domain/clock.js';
import { AppError, type ValidationIssue } from '../domain/errors.js';
import { PLAN_RULES, type Plan } from '../domain/plans.js';
import { atQuota, effectiveQuota, reservationFor, type PlanQuotas, type Quota } from '../domain/quotas.js';
import { isUuid } from '../domain/ids.js';
import { iso } from '../domain/time.js';
import type { BlobStore, ByteRange } from '../blobs/blob-store.js';
import type { StatusBus } from '../events/status-bus.js';
import type { Account, Backup, Store, Vault, VaultChange, VaultHistoryEntry, VaultKeep } from '../store/store.js';
import { limited, TooLarge } from './byte-limit.js';
import { refuseHostAccount } from './operator.js';
import { usageReport, type UsageReport } from './usage.js';

const VISIBLE_STATUSES = BACKUP_STATUSES.filter(isVisible);

/** The bootstrap/rotate body, as its TypeBox schema defines it. */
export type VaultEnvelope = BackupAccountEnvelopeBody;

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

/** Who reads: the caller's account, and whether its credential is append-only (a host's key reads nothing else). */
export interface Reader {
  accountId: string;
  appendOnly: boolean;
}

/** A host account as its owner sees it (GET /api/host-accounts). */
export interface HostAccountView {
  account: Account;
  /** `shared`: its vault envelope is the owner's; `diverged`: another one; `none`: it has no vault. */
  vault: 'shared' | 'diverged' | 'none';
}

export interface BackupServiceOptions {
  maxArchiveBytes: number;
  uploadWindowMs: number;
  /** Each plan's storage quota (absent: none); an account's own quota replaces it. */
  planQuotas?: PlanQuotas;
}

/** Decoded-size bounds of binary fields, in bytes (docs/api-rules.md#encoding). */
const BINARY_BOUNDS: Record<string, [number, number]> = {
  salt: [8, 64],
  wrappedMasterKeyNonce: [8, 64],
  wrappedDekNonce: [8, 64],
  encryptedMetadataNonce: [8, 64],
  wrappedMasterKey: [16, 4096],
  wrappedDek: [16, 4096],
  encryptedMetadata: [1, 65_536],
};

/** Checks decoded sizes of base64 fields (the schema already checked the alphabet and padding). */
export function binaryIssues(fields: Record<string, string>, prefix = ''): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const [name, value] of Object.entries(fields)) {
    const [min, max] = BINARY_BOUNDS[name]!;
    const bytes = Buffer.byteLength(value, 'base64');
    if (bytes < min || bytes > max) {
      issues.push({ path: `${prefix}${name}`, message: `must decode to ${min}–${max} bytes, got ${bytes}` });
    }
  }
  return issues;
}

/** A new upload slot: PENDING_UPLOAD, nothing uploaded or sealed yet. */
export function newSlot(id: string, accountId: string, createdAt: number, expiresAt: number): Backup {
  return {
    id,
    accountId,
    status: 'PENDING_UPLOAD',
    createdAt,
    expiresAt,
    updatedAt: createdAt,
    blobPath: `backups/${accountId}/${id}`,
    blobKey: null,
    ciphertextSizeBytes: null,
    plaintextSizeBytes: null,
    clientVersion: null,
    hostappVersion: null,
    cryptoVersion: 'v1',
    wrappedDek: null,
    wrappedDekNonce: null,
    encryptedMetadata: null,
    encryptedMetadataNonce: null,
    deletedAt: null,
    purgeAfter: null,
  };
}

/** Who made a change: an API key id, `session:<id>` for a console session, `operator` for `coffer admin`. */
export type Actor = string;

export class BackupService {
  /** Refusals for the quota since start, by where (for /metrics). */
  readonly quotaRefusals = { create: 0, upload: 0 };

  constructor(
    private readonly store: Store,
    private readonly blobs: BlobStore,
    private readonly bus: StatusBus,
    private readonly clock: Clock,
    private readonly options: BackupServiceOptions,
  ) {}

  private async changed(backup: Backup): Promise<Backup> {
    await this.bus.publish(backup);
    return backup;
  }

  // ---- account and vault ----

  async accountView(accountId: string): Promise<AccountView> {
    const account = await this.store.getAccount(accountId);
    if (!account) throw new Error(`account ${accountId} vanished`);
    return { account, vault: await this.store.getVault(accountId) };
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
    const created = await this.store.createVault(accountId, this.checkEnvelope(envelope));
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
    actor: Actor = 'unknown',
    ifMatch?: IfMatch,
  ): Promise<AccountView & { rotated: true; historyDays: number }> {
    const vault = this.checkEnvelope(envelope);
    const graceDays = await this.graceDays(accountId);
    const keep = this.keep('rotate', actor, graceDays);
    const missing = () => new AppError('vault_not_initialized', 'There is no vault to rotate.');
    // The envelope being replaced: the compare-and-swap's expectation with If-Match, and what host accounts follow.
    const previous = await this.store.getVault(accountId);
    let expected: Vault | undefined;
    if (ifMatch !== undefined) {
      expected = previous;
      if (!expected) throw missing();
    }
    const matches = ifMatch === undefined || ifMatch === '*' || ifMatch.includes(vaultEtag(expected!));
    if (!matches || !(await this.store.replaceVault(accountId, vault, { keep, expected }))) {
      // Changed before the check, or between the check and the write: say what it is now.
      const now = await this.store.getVault(accountId);
      if (!now) throw missing();
      throw new AppError('vault_changed', 'The vault material was changed since it was read: If-Match does not name its current ETag.', {
        currentEtag: vaultEtag(now),
      });
    }
    await this.followOwner(accountId, previous, vault);
    return { ...(await this.accountView(accountId)), rotated: true, historyDays: graceDays };
  }

  private async graceDays(accountId: string): Promise<number> {
    return (await this.store.getAccount(accountId))?.deletionGraceDays ?? 0;
  }

  /** How to keep a replaced envelope for `graceDays` (undefined: not kept, the grace is 0). */
  private keep(reason: VaultChange, actor: Actor, graceDays: number): VaultKeep | undefined {
    const now = this.clock.now();
    const expiresAt = vaultHistoryExpiresAt(graceDays, now);
    if (expiresAt === null) return undefined;
    return { id: uuidv7(), replacedAt: now, replacedBy: actor, reason, expiresAt, limit: VAULT_HISTORY_LIMIT };
  }

  async reset(accountId: string, deleteBackups: boolean, actor: Actor = 'unknown') {
    await this.sweep(accountId);
    const remaining = await this.store.listBackups(accountId, VISIBLE_STATUSES);
    if (remaining.length > 0 && !deleteBackups) {
      throw new AppError('vault_not_empty', 'The account still has backups.', {
        remainingBackups: remaining.length,
      });
    }
    const graceDays = await this.graceDays(accountId);
    let deletedBackups = 0;
    for (const backup of remaining) {
      if (await this.deleteRecord(backup, graceDays)) deletedBackups += 1;
    }
    const accountDeleted = await this.store.deleteVault(accountId, this.keep('reset', actor, graceDays));
    return { reset: true, accountDeleted, deletedBackups };
  }

  // ---- deletion grace and vault history (docs/api-rules.md#deletion-grace) ----

  async setDeletionGrace(accountId: string, days: number): Promise<void> {
    if (!isDeletionGrace(days)) {
      throw AppError.validation([{ path: 'days', message: `must be a whole number of days from 0 to ${MAX_DELETION_GRACE_DAYS}` }]);
    }
    if (!(await this.store.setDeletionGrace(accountId, days))) throw new Error(`account ${accountId} vanished`);
  }

  /** The account's backups scheduled for deletion that can still be restored, newest first. */
  async listScheduled(accountId: string): Promise<Backup[]> {
    const now = this.clock.now();
    return (await this.store.listBackups(accountId, ['DELETING'])).filter((backup) => isRestorable(backup, now));
  }

  /** A backup scheduled for deletion, of this account (any account when null); 404 otherwise. */
  private async findScheduled(accountId: string | null, id: string): Promise<Backup> {
    const backup = isUuid(id) ? await this.store.getBackup(id) : undefined;
    if (!backup || (accountId !== null && backup.accountId !== accountId) || !isRestorable(backup, this.clock.now())) {
      throw new AppError('backup_not_found', 'No backup with this id is scheduled for deletion.');
    }
    return backup;
  }

  /** Returns a backup scheduled for deletion to READY (its ciphertext never left). accountId null: an operator. */
  async undelete(accountId: string | null, id: string): Promise<Backup> {
    const backup = await this.findScheduled(accountId, id);
    const now = this.clock.now();
    const restored = await this.store.updateBackup(
      backup.id,
      { statuses: ['DELETING'], scheduled: { dueAfter: now } },
      { status: 'READY', purgeAfter: null, deletedAt: null, updatedAt: now },
    );
    if (!restored) throw new AppError('backup_not_found', 'No backup with this id is scheduled for deletion.');
    return this.changed(restored);
  }

  /** Ends the grace of a backup scheduled for deletion now: its ciphertext goes and the record becomes DELETED. */
  async purge(accountId: string, id: string): Promise<Backup> {
    const backup = await this.findScheduled(accountId, id);
    const claimed = await this.claimScheduled(backup, { dueAfter: this.clock.now() });
    const deleted = claimed && (await this.finishDelete(claimed));
    if (!deleted) throw new AppError('backup_not_found', 'No backup with this id is scheduled for deletion.');
    return deleted;
  }

  /** Takes a scheduled delete out of its grace (purgeAfter → null): from here on nobody can restore it. */
  private claimScheduled(backup: Backup, scheduled: { dueAfter?: number; dueBy?: number }): Promise<Backup | undefined> {
    return this.store.updateBackup(backup.id, { statuses: ['DELETING'], scheduled }, { purgeAfter: null, updatedAt: this.clock.now() });
  }

  /** The account's kept vault envelopes, newest first. */
  vaultHistory(accountId: string): Promise<VaultHistoryEntry[]> {
    return this.store.listVaultHistory(accountId, this.clock.now());
  }

  /**
   * Makes a kept envelope the vault again. The envelope it replaces is kept in turn (for the grace, and at least a
   * day), so a restore can itself be undone.
   */
  async restoreVault(accountId: string, entryId: string, actor: Actor): Promise<Vault> {
    const graceDays = Math.max(1, await this.graceDays(accountId));
    const previous = await this.store.getVault(accountId);
    const restored = isUuid(entryId)
      ? await this.store.restoreVault(accountId, entryId, this.clock.now(), this.keep('restore', actor, graceDays))
      : undefined;
    if (!restored) throw new AppError('not_found', 'No such envelope in the vault history (it may have expired).');
    await this.followOwner(accountId, previous, restored);
    return restored;
  }

  /** Deletes kept envelopes whose time is up. */
  pruneVaultHistory(): Promise<number> {
    return this.store.pruneVaultHistory(this.clock.now());
  }

  // ---- quotas and usage (docs/api-rules.md#quota) ----

  private quotaOf(account: { plan: Plan; quotaOverride?: number | null }): Quota {
    return effectiveQuota(account.plan, account.quotaOverride, this.options.planQuotas ?? {});
  }

  /** Every account's storage and freshness, and the totals (src/services/usage.ts). */
  usage(): Promise<UsageReport> {
    return usageReport(this.store, this.clock.now(), this.options.planQuotas ?? {});
  }

  /**
   * The quota the account stores under and what counts against it now: its fleet's (an owner's quota covers the owner
   * and every host account it made); undefined when there is no such account.
   */
  async quota(accountId: string): Promise<{ quota: Quota; usage: number } | undefined> {
    const fleet = await this.fleetQuota(accountId);
    return fleet && { quota: fleet.quota, usage: fleet.usage };
  }

  /** quota(), and how many accounts share it (the owner and its host accounts). */
  private async fleetQuota(accountId: string): Promise<{ quota: Quota; usage: number; accounts: number } | undefined> {
    const fleet = await this.store.fleetUsage(this.clock.now(), accountId);
    return fleet && { quota: this.quotaOf(fleet.owner), usage: fleet.storedBytes, accounts: fleet.accounts };
  }

  /** Sets an account's own quota (bytes, or null: none), or with undefined returns it to its plan's. */
  async setQuota(accountId: string, quota: Quota | undefined): Promise<void> {
    if (quota !== undefined && quota !== null && !(Number.isSafeInteger(quota) && quota >= 0)) {
      throw AppError.validation([{ path: 'quota', message: 'must be a whole number of bytes, or none' }]);
    }
    const account = await this.store.getAccount(accountId);
    if (account) refuseHostAccount(account, 'quota');
    if (!(await this.store.setQuota(accountId, quota))) throw new AppError('not_found', `No account ${accountId}.`);
  }

  /** The refusal of a create (409) or an upload (413) by the quota, counted for /metrics (the blob host's too). */
  quotaRefused(where: 'create' | 'upload', quota: number, usage: number, declared?: number, fleetAccounts = 1): AppError {
    this.quotaRefusals[where] += 1;
    const details = { quota, usage, ...(declared === undefined ? {} : { uploadBytes: declared }) };
    const stores =
      fleetAccounts > 1
        ? `The owner account and its ${fleetAccounts - 1} host account${fleetAccounts === 2 ? '' : 's'} store ${usage} bytes together; their quota is ${quota} bytes.`
        : `The account stores ${usage} bytes; its quota is ${quota} bytes.`;
    return where === 'create'
      ? new AppError('quota_exceeded', stores, details)
      : new AppError(
          'upload_exceeds_quota',
          `This upload does not fit in the quota: ${Math.max(0, quota - usage)} of ${quota} bytes are left.`,
          details,
        );
  }

  // ---- backups ----

  async create(accountId: string): Promise<{ backup: Backup; plan: Plan }> {
    const now = this.clock.now();
    // Usage is summed only for a fleet that has a quota (the owner's row is a cached read; the sums are not).
    const account = await this.store.getAccount(accountId);
    const owner = account?.ownerAccountId ? await this.store.getAccount(account.ownerAccountId) : account;
    const status = owner && this.quotaOf(owner) !== null ? await this.fleetQuota(accountId) : undefined;
    if (status && status.quota !== null && atQuota(status.quota, status.usage)) {
      throw this.quotaRefused('create', status.quota, status.usage, undefined, status.accounts);
    }
    const id = uuidv7();
    const backup = newSlot(id, accountId, now, slotExpiresAt(now, this.options.uploadWindowMs));
    let plan: Plan = 'free';
    const decision = await this.store.createBackup(
      accountId,
      now,
      (snapshot) => {
        plan = snapshot.plan;
        return decideCreate(snapshot, now);
      },
      backup,
    );
    if (decision.allowed) return { backup: await this.changed(backup), plan };
    switch (decision.reason) {
      case 'vault_not_initialized':
        throw new AppError('vault_not_initialized', 'Initialize the vault before creating a backup.');
      case 'upload_in_progress':
        throw new AppError('upload_in_progress', 'Another backup upload slot is still open.', {
          backupId: decision.backupId,
        });
      case 'backup_cadence_exceeded': {
        const retryAfter = secondsUntil(decision.nextAllowedAt, now);
        throw new AppError(
          'backup_cadence_exceeded',
          `The ${plan} plan allows one backup per ${PLAN_RULES[plan].intervalWords}.`,
          {
            nextAllowedAt: iso(decision.nextAllowedAt),
            backupInterval: PLAN_RULES[plan].interval,
            retryAfterSeconds: retryAfter,
            // The caller's own account and plan: what an operator needs to move it to a shorter interval.
            accountId,
            plan,
          },
          { 'retry-after': String(retryAfter) },
        );
      }
    }
  }

  async list(accountId: string): Promise<Backup[]> {
    // Expired and failed records are pruned before a list is built (docs/api-rules.md#states). The listed records
    // themselves tell whether any is due, so the common case costs one query instead of a sweep query plus the list
    // (bench P3). Unfinished deletes are not listed: the background sweeper completes those.
    const now = this.clock.now();
    const visible = await this.store.listBackups(accountId, VISIBLE_STATUSES);
    if (!visible.some((backup) => sweepActionFor(backup.status, backup.expiresAt, now, backup.purgeAfter) !== null)) return visible;
    await this.sweep(accountId);
    return this.store.listBackups(accountId, VISIBLE_STATUSES);
  }

  /**
   * The caller's visible backup with this id, after applying any expiry that is due.
   * Unknown, malformed, hidden and other accounts' ids are all undefined: they must look the same.
   */
  async findVisible(accountId: string, id: string): Promise<Backup | undefined> {
    if (!isUuid(id)) return undefined;
    let backup = await this.store.getBackup(id);
    if (!backup || backup.accountId !== accountId) return undefined;
    if (!isVisible(backup.status)) return undefined;
    if (sweepActionFor(backup.status, backup.expiresAt, this.clock.now()) !== null) {
      backup = (await this.sweepOne(backup)) ?? (await this.store.getBackup(id))!;
    }
    return isVisible(backup.status) ? backup : undefined;
  }

  /**
   * Whether `reader` may read the backups of `accountId`: its own account's always; a host account's when the reader's
   * account owns it and the credential is not append-only (docs/api-rules.md#host-accounts). Nothing else, ever.
   */
  async mayReadAccount(reader: Reader, accountId: string): Promise<boolean> {
    if (accountId === reader.accountId) return true;
    if (reader.appendOnly) return false;
    const account = await this.store.getAccount(accountId);
    return account !== undefined && account.ownerAccountId === reader.accountId;
  }

  /**
   * The visible backup with this id that `reader` may read: its own, or one of its host accounts' (mayReadAccount).
   * Anything else is 404, exactly like an unknown id.
   */
  async getReadable(reader: Reader, id: string): Promise<Backup> {
    const own = await this.findVisible(reader.accountId, id);
    if (own) return own;
    if (!reader.appendOnly && isUuid(id)) {
      const stored = await this.store.getBackup(id);
      if (stored && stored.accountId !== reader.accountId && (await this.mayReadAccount(reader, stored.accountId))) {
        const backup = await this.findVisible(stored.accountId, id);
        if (backup) return backup;
      }
    }
    throw new AppError('backup_not_found', 'No such backup.');
  }

  /** The reader's host accounts, oldest first, with whether each still shares the reader's vault envelope. */
  async hostAccounts(reader: Reader): Promise<HostAccountView[]> {
    if (reader.appendOnly) return [];
    const [hosts, vault] = await Promise.all([this.store.listHostAccounts(reader.accountId), this.store.getVault(reader.accountId)]);
    const ownerEtag = vault ? vaultEtag(vault) : null;
    return Promise.all(
      hosts.map(async (account) => {
        const hostVault = await this.store.getVault(account.id);
        const state: HostAccountView['vault'] = !hostVault ? 'none' : vaultEtag(hostVault) === ownerEtag ? 'shared' : 'diverged';
        return { account, vault: state };
      }),
    );
  }

  /** The visible backups of one of the reader's host accounts; 404 `not_found` for any other id. */
  async listHost(reader: Reader, hostAccountId: string): Promise<Backup[]> {
    const lower = hostAccountId.toLowerCase();
    if (!isUuid(lower) || lower === reader.accountId || !(await this.mayReadAccount(reader, lower))) {
      throw new AppError(
        'not_found',
        'None of your host accounts has this id.',
        undefined,
        undefined,
        'List your host accounts with GET /api/host-accounts.',
      );
    }
    return this.list(lower);
  }

  /**
   * After the owner's envelope changed from `before` to `after`: the same change on every host account that still
   * held `before` (compare-and-swap per account, so a host account whose vault diverged is left alone).
   */
  private async followOwner(ownerAccountId: string, before: Vault | undefined, after: Vault): Promise<void> {
    if (!before) return;
    for (const host of await this.store.listHostAccounts(ownerAccountId)) {
      const current = await this.store.getVault(host.id);
      if (current && vaultEtag(current) === vaultEtag(before)) {
        await this.store.replaceVault(host.id, after, { expected: current });
      }
    }
  }

  async getVisible(accountId: string, id: string): Promise<Backup> {
    const backup = await this.findVisible(accountId, id);
    if (!backup) throw new AppError('backup_not_found', 'No such backup.');
    return backup;
  }

  async uploadDirect(
    accountId: string,
    backupId: string | undefined,
    body: Readable,
    contentLength: number | undefined,
  ): Promise<{ pathname: string; size: number }> {
    const issue = (message: string) => AppError.validation([{ path: 'backupId', message }]);
    if (backupId === undefined || backupId === '') throw issue('is required for a direct upload');
    if (!isUuid(backupId)) throw issue('must be a UUID');
    const backup = await this.findVisible(accountId, backupId);
    if (!backup) throw issue('does not name one of your backups');
    const max = this.options.maxArchiveBytes;
    if (contentLength !== undefined && contentLength > max) throw this.tooLarge();
    if (backup.status !== 'PENDING_UPLOAD') throw this.wrongState(backup.status);

    // The bytes are reserved against the quota in the database before any is stored: the declared length, or for
    // a body of unknown length what is left (the stream is cut there), so concurrent uploads cannot both fit.
    const reservation = { id: uuidv7(), accountId, backupId: backup.id, expiresAt: backup.expiresAt };
    const reserved = await this.store.reserveUpload(
      reservation,
      this.clock.now(),
      (quota, usage) => reservationFor(quota, usage, contentLength, max),
      (account) => this.quotaOf(account),
    );
    if (reserved.reserved === null) throw this.quotaRefused('upload', reserved.quota, reserved.usage, contentLength);
    const cap = reserved.reserved;
    let released = false;
    try {
      const blobKey = this.newBlobKey(backup);
      let size: number;
      try {
        ({ size } = await this.blobs.put(blobKey, limited(body, cap), { size: contentLength }));
      } catch (error) {
        if (error instanceof TooLarge) {
          if (cap < max) {
            const now = await this.quota(accountId);
            throw this.quotaRefused('upload', now?.quota ?? cap, (now?.usage ?? cap) - cap);
          }
          throw this.tooLarge();
        }
        throw error;
      }
      // UPLOADED now counts the stored bytes: the reservation ends in the same commit as the record's update.
      await this.recordUpload(backup, blobKey, size, reservation.id);
      released = true;
      return { pathname: backup.blobPath, size };
    } finally {
      // Nothing was stored (or the update failed): the reservation ends. Deleting an ended one again is harmless.
      if (!released) await this.store.releaseUpload(reservation.id);
    }
  }

  /** A fresh blob key for one upload attempt into the slot (attempts never overwrite each other). */
  newBlobKey(backup: Backup): string {
    return `${backup.blobPath}/${uuidv7()}.bin`;
  }

  /**
   * Records that `blobKey` holds the slot's whole ciphertext: PENDING_UPLOAD → UPLOADED (any upload protocol).
   * When another upload, a delete or expiry got there first, this attempt's bytes are removed and the
   * current state is reported as invalid_backup_state.
   */
  async recordUpload(backup: Backup, blobKey: string, size: number, reservationId?: string): Promise<Backup> {
    const uploaded = await this.store.updateBackup(
      backup.id,
      { statuses: ['PENDING_UPLOAD'] },
      { status: 'UPLOADED', blobKey, ciphertextSizeBytes: size, updatedAt: this.clock.now() },
      reservationId,
    );
    if (!uploaded) {
      await this.blobs.delete(blobKey);
      const current = await this.store.getBackup(backup.id);
      throw this.wrongState(current?.status ?? 'DELETED');
    }
    return this.changed(uploaded);
  }

  private tooLarge(): AppError {
    const max = this.options.maxArchiveBytes;
    return new AppError('payload_too_large', `The encrypted archive is larger than ${max} bytes.`, {
      maxBytes: max,
    });
  }

  private wrongState(status: BackupStatus): AppError {
    return new AppError('invalid_backup_state', `The backup is ${status}.`, { status });
  }

  /** `backup`: the caller's visible backup (getVisible), as the request's onRequest step read it; not read again (bench P8). */
  async finalize(backup: Backup, input: BackupFinalizeBody): Promise<Backup> {
    const issues = binaryIssues({
      wrappedDek: input.wrappedDek,
      wrappedDekNonce: input.wrappedDekNonce,
      encryptedMetadata: input.encryptedMetadata,
      encryptedMetadataNonce: input.encryptedMetadataNonce,
    });
    if (issues.length > 0) throw AppError.validation(issues);
    const account = await this.store.getAccount(backup.accountId);
    const now = this.clock.now();
    const ready = await this.store.markReady(
      backup.id,
      { statuses: ['UPLOADED'], ciphertextSizeBytes: input.ciphertextSizeBytes },
      {
        wrappedDek: input.wrappedDek,
        wrappedDekNonce: input.wrappedDekNonce,
        encryptedMetadata: input.encryptedMetadata,
        encryptedMetadataNonce: input.encryptedMetadataNonce,
        plaintextSizeBytes: input.plaintextSizeBytes,
        clientVersion: input.clientVersion ?? null,
        hostappVersion: input.hostappVersion ?? null,
        expiresAt: retentionExpiresAt(now, account!.plan),
        updatedAt: now,
      },
    );
    if (ready) return this.changed(ready);
    const current = await this.store.getBackup(backup.id);
    if (!current || !isVisible(current.status)) throw new AppError('backup_not_found', 'No such backup.');
    if (current.status !== 'UPLOADED') throw this.wrongState(current.status);
    throw new AppError(
      'ciphertext_size_mismatch',
      `ciphertextSizeBytes is ${input.ciphertextSizeBytes} but ${current.ciphertextSizeBytes} bytes were uploaded.`,
      { uploadedSizeBytes: current.ciphertextSizeBytes },
    );
  }

  async openContent(
    accountId: string,
    id: string,
    range?: ByteRange,
  ): Promise<{ backup: Backup & { blobKey: string; ciphertextSizeBytes: number }; stream: Readable }> {
    const backup = await this.readyForContent(accountId, id);
    const stream = await this.blobs.get(backup.blobKey, range);
    return { backup, stream };
  }

  /**
   * What openContent checks, without opening: the key of a READY backup's blob, which exists (for a proxy that
   * sends the bytes itself, COFFER_ACCEL_REDIRECT).
   */
  async locateContent(accountId: string, id: string): Promise<{ blobKey: string }> {
    const backup = await this.readyForContent(accountId, id);
    if ((await this.blobs.stat(backup.blobKey)) === null) throw new Error(`the blob of backup ${backup.id} is missing`);
    return { blobKey: backup.blobKey };
  }

  private async readyForContent(accountId: string, id: string): Promise<Backup & { blobKey: string; ciphertextSizeBytes: number }> {
    const backup = await this.getVisible(accountId, id);
    if (backup.status !== 'READY' || backup.blobKey === null || backup.ciphertextSizeBytes === null) {
      throw new AppError('backup_content_unavailable', `The backup is ${backup.status}; only READY backups have content.`);
    }
    return backup as Backup & { blobKey: string; ciphertextSizeBytes: number };
  }

  /**
   * With a deletion grace, a READY backup becomes DELETING (hidden, ciphertext kept until purgeAfter) and that is
   * the answer; otherwise it is DELETED once its ciphertext is gone.
   */
  async delete(accountId: string, id: string): Promise<Backup> {
    const backup = await this.getVisible(accountId, id);
    const deleted = await this.deleteRecord(backup, await this.graceDays(accountId));
    if (!deleted) throw new AppError('backup_not_found', 'No such backup.');
    return deleted;
  }

  /**
   * visible → DELETING → (blob removed) → DELETED; with a grace (READY only), visible → DELETING with purgeAfter
   * set, and the sweeper finishes it when the grace ends. Returns undefined when someone else deleted it first.
   * Plan expiry (prune) passes graceDays 0: the grace never protects an expired backup.
   */
  private async deleteRecord(backup: Backup, graceDays = 0): Promise<Backup | undefined> {
    const now = this.clock.now();
    const purgeAfter = purgeAfterFor(backup, graceDays, now);
    const deleting = await this.store.updateBackup(
      backup.id,
      { statuses: purgeAfter === null ? VISIBLE_STATUSES : ['READY'] },
      { status: 'DELETING', purgeAfter, updatedAt: now },
    );
    if (!deleting) return undefined;
    await this.changed(deleting);
    if (purgeAfter !== null) return deleting;
    return this.finishDelete(deleting);
  }

  private async finishDelete(deleting: Backup): Promise<Backup | undefined> {
    if (deleting.blobKey !== null) await this.blobs.delete(deleting.blobKey);
    const now = this.clock.now();
    const deleted = await this.store.updateBackup(
      deleting.id,
      { statuses: ['DELETING'] },
      { status: 'DELETED', deletedAt: now, updatedAt: now },
    );
    if (deleted) return this.changed(deleted);
    // Someone else (the sweeper) finished it first: the outcome is the same.
    const current = await this.store.getBackup(deleting.id);
    return current?.status === 'DELETED' ? current : undefined;
  }

  // ---- sweeping (expiry, pruning, unfinished deletes) ----

  /** Applies every due transition; with an account id, only that account's. Returns how many records moved. */
  async sweep(accountId?: string): Promise<number> {
    let moved = 0;
    for (const backup of await this.store.listSweepCandidates(this.clock.now(), accountId)) {
      if (await this.sweepOne(backup)) moved += 1;
    }
    return moved;
  }

  private async sweepOne(backup: Backup): Promise<Backup | undefined> {
    const now = this.clock.now();
    switch (sweepActionFor(backup.status, backup.expiresAt, now, backup.purgeAfter)) {
      case 'fail': {
        const failed = await this.store.updateBackup(backup.id, { statuses: IN_FLIGHT_STATUSES }, { status: 'FAILED', updatedAt: now });
        if (!failed) return undefined;
        await this.changed(failed);
        return this.sweepOne(failed);
      }
      case 'prune':
        return this.deleteRecord(backup);
      case 'finish-delete': {
        if (backup.purgeAfter === null) return this.finishDelete(backup);
        // The grace has ended: claim it (an undelete racing this loses), then remove the ciphertext.
        const claimed = await this.claimScheduled(backup, { dueBy: now });
        return claimed && this.finishDelete(claimed);
      }
      case null:
        return undefined;
    }
  }
}
