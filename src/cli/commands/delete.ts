/** `coffer delete <id>`: deletes a backup and its encrypted archive. */
import type { Command } from 'commander';
import { action, clientFor, type JsonOption } from '../command-frame.js';
import { print, printJson } from '../output.js';

export function registerDelete(program: Command): void {
  program
    .command('delete <id>')
    .description('delete a backup and its encrypted archive')
    .option('--json', 'print the API response as JSON')
    .action(
      action(async ({ signal, config }, id: string, options: JsonOption) => {
        const result = await clientFor(config).deleteBackup(id, signal);
        if (options.json) return printJson(result);
        if (result.status === 'DELETING') {
          // The account has a deletion grace: hidden now, its ciphertext kept until the grace ends.
          print(`backup ${result.id} is scheduled for deletion; the account owner can restore it from the console until its grace ends`);
        } else print(`deleted backup ${result.id} (${result.status})`);
      }),
    );
}
