/** `coffer admin backups …`: act on backups (undelete), and list those whose object the store keeps locked. */
import type { Command } from 'commander';
import { AppError } from '../../domain/errors.js';
import { iso } from '../../domain/time.js';
import type { LockedBackup } from '../../services/usage.js';
import { bytes } from '../format.js';
import { CliError, emit } from '../output.js';
import { operator, textTable, withServices } from './frame.js';

export function registerBackupCommands(admin: Command): void {
  const backups = admin.command('backups').description('act on backups, list the locked ones');
  backups
    .command('undelete <backupId>')
    .description('return a backup scheduled for deletion (within its deletion grace) to READY')
    .option('--json', 'print JSON')
    .action(async (backupId: string, opts: { json?: boolean }) => {
      const backup = await withServices(async ({ retention, audit }) => {
        try {
          const restored = await (await retention()).undelete(null, backupId);
          await audit.record({ accountId: restored.accountId, action: 'backup.undelete', ...operator(), target: restored.id });
          return restored;
        } catch (error) {
          if (error instanceof AppError && error.code === 'backup_not_found') {
            throw new CliError(`no backup ${backupId} is scheduled for deletion (unknown, never deleted, or its grace has ended)`);
          }
          throw error;
        }
      });
      const result = { backupId: backup.id, accountId: backup.accountId, status: backup.status, expiresAt: iso(backup.expiresAt) };
      emit(!!opts.json, result, () => `backup ${backup.id} of account ${backup.accountId} is READY again (expires ${result.expiresAt})`);
    });
  backups
    .command('locked')
    .description('backups whose object the store keeps locked (S3 Object Lock) and until when, DELETED records included')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string; json?: boolean }) => {
      const { lockedBackups } = await import('../../services/usage.js');
      const result = await withServices(async ({ stores, clock }) => {
        const now = clock.now();
        return { at: iso(now), backups: await lockedBackups(stores.usage, now, opts.account) };
      });
      emit(!!opts.json, result, () => lockedTable(result.backups, opts.account));
    });
}

/** One line per locked backup, latest retain-until first; a sentence when there is none. */
function lockedTable(locked: LockedBackup[], accountId: string | undefined): string {
  if (locked.length === 0) return accountId ? `no backup of account ${accountId} is locked` : 'no backup is locked';
  const rows = locked.map((backup) => [
    backup.backupId,
    backup.accountId,
    backup.status,
    backup.ciphertextSizeBytes === null ? '' : bytes(backup.ciphertextSizeBytes),
    backup.lockedUntil,
  ]);
  return textTable(['BACKUP', 'ACCOUNT', 'STATUS', 'SIZE', 'LOCKED UNTIL'], rows);
}
