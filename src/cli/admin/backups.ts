/** `coffer admin backups …`: act on backups (undelete). */
import type { Command } from 'commander';
import { AppError } from '../../domain/errors.js';
import { iso } from '../../domain/time.js';
import { CliError, emit } from '../output.js';
import { operator, withServices } from './frame.js';

export function registerBackupCommands(admin: Command): void {
  admin
    .command('backups')
    .description('act on backups')
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
}
