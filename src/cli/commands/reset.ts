/** `coffer reset`: deletes the vault key material (and with --delete-backups every backup). */
import { plural } from '../../domain/words.js';
import type { Command } from 'commander';
import { action, clientFor, type JsonOption } from '../command-frame.js';
import { confirmOnTerminal } from '../secrets.js';
import { CliError, EXIT, print, printJson } from '../output.js';

export function registerReset(program: Command): void {
  program
    .command('reset')
    .description('delete the vault key material (and, with --delete-backups, every backup): irreversible')
    .option('--delete-backups', 'also delete every remaining backup')
    .option('--yes', 'do not ask for confirmation on a terminal')
    .option('--json', 'print the API response as JSON')
    .action(
      action(async ({ signal, config }, options: JsonOption & { deleteBackups?: boolean; yes?: boolean }) => {
        const client = clientFor(config);
        if (options.deleteBackups && !options.yes) {
          const confirmed = await confirmOnTerminal(
            'This deletes every backup and the vault key material for good. Type "delete" to continue: ',
            'delete',
            signal,
          );
          if (!confirmed) throw new CliError('reset cancelled; nothing was deleted', EXIT.failure);
        }
        const result = await client.reset({ deleteBackups: !!options.deleteBackups }, signal);
        if (options.json) return printJson(result);
        print(
          `reset: vault material ${result.accountDeleted ? 'deleted' : 'was already absent'}, ` +
            `${plural(result.deletedBackups, 'backup')} deleted. Run \`coffer init\` to start again.`,
        );
      }),
    );
}
