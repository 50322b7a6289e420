/**
 * Who may read which backups (docs/api-rules.md#host-accounts): a caller reads its own account's; an owner also reads
 * its host accounts' unless its credential is append-only. Nothing else, ever: any other id looks unknown.
 */
import type { Account, Backup } from '../domain/entities.js';
import { AppError } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import type { Stores } from '../store/ports/stores.js';
import type { BackupService } from './backups.js';
import { vaultEtag } from './vault.js';

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

export class ReadPolicy {
  constructor(
    private readonly ports: Pick<Stores, 'accounts' | 'vaults' | 'backups'>,
    private readonly backups: BackupService,
  ) {}

  /**
   * Whether `reader` may read the backups of `accountId`: its own account's always; a host account's when the reader's
   * account owns it and the credential is not append-only (docs/api-rules.md#host-accounts). Nothing else, ever.
   */
  async mayReadAccount(reader: Reader, accountId: string): Promise<boolean> {
    if (accountId === reader.accountId) return true;
    if (reader.appendOnly) return false;
    const account = await this.ports.accounts.getAccount(accountId);
    return account !== undefined && account.ownerAccountId === reader.accountId;
  }

  /**
   * The visible backup with this id that `reader` may read: its own, or one of its host accounts' (mayReadAccount).
   * Anything else is 404, exactly like an unknown id.
   */
  async getReadable(reader: Reader, id: string): Promise<Backup> {
    const own = await this.backups.findVisible(reader.accountId, id);
    if (own) return own;
    if (!reader.appendOnly && isUuid(id)) {
      const stored = await this.ports.backups.getBackup(id);
      if (stored && stored.accountId !== reader.accountId && (await this.mayReadAccount(reader, stored.accountId))) {
        const backup = await this.backups.findVisible(stored.accountId, id);
        if (backup) return backup;
      }
    }
    throw new AppError('backup_not_found', 'No such backup.');
  }

  /** The reader's host accounts, oldest first, with whether each still shares the reader's vault envelope. */
  async hostAccounts(reader: Reader): Promise<HostAccountView[]> {
    if (reader.appendOnly) return [];
    const [hosts, vault] = await Promise.all([
      this.ports.accounts.listHostAccounts(reader.accountId),
      this.ports.vaults.getVault(reader.accountId),
    ]);
    const ownerEtag = vault ? vaultEtag(vault) : null;
    return Promise.all(
      hosts.map(async (account) => {
        const hostVault = await this.ports.vaults.getVault(account.id);
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
    return this.backups.list(lower);
  }
}
