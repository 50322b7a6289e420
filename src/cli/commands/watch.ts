/** `coffer watch <id>`: follows a backup's status until it settles. */
import type { Command } from 'commander';
import { watchBackup } from '../../client/index.js';
import { action, clientFor, type JsonOption } from '../command-frame.js';
import { localTime } from '../format.js';
import { CliError, EXIT, note, print, printJson } from '../output.js';

export function registerWatch(program: Command): void {
  program
    .command('watch <id>')
    .description('follow the status of a backup until it is READY, FAILED or DELETED (exit 1 when FAILED)')
    .option('--json', 'print each event (BackupStatusEvent, then the closing frame) as one JSON line')
    .action(
      action(async ({ signal, config }, id: string, options: JsonOption) => {
        const client = clientFor(config);
        let last: string | undefined;
        let final: string | undefined;
        for await (const event of watchBackup(client, id, { signal })) {
          if (event.type === 'status') {
            final = event.data.status;
            if (options.json) printJson(event.data);
            else if (event.data.status !== last) {
              print(`${localTime(event.data.observedAt)}  ${event.data.backupId}  ${event.data.status}`);
            }
            last = event.data.status;
          } else if (event.type === 'closed') {
            final = event.data.status;
            if (options.json) printJson(event.data);
          } else if (!options.json) {
            note(`reconnecting (${event.reason})`);
          }
        }
        if (final === 'FAILED') throw new CliError(`backup ${id} FAILED`, EXIT.failure);
      }),
    );
}
