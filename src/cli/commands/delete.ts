/** `coffer delete <id>`: deletes a backup and its encrypted archive. */
import type { Command } from 'commander';
import { action, clientFor, type JsonOption } from '../client-io.js';
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
        print(`deleted backup ${result.id} (${result.status})`);
      }),
    );
}
