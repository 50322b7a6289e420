/** `coffer list`: the account's backups, newest first. */
import type { Command } from 'commander';
import type { BackupRecordBody } from '../../client/sdk.js';
import { action, bytes, clientFor, type JsonOption, localTime } from '../client-io.js';
import { print, printJson } from '../output.js';

function table(rows: BackupRecordBody[]): string {
  if (rows.length === 0) return 'no backups';
  const header = ['ID', 'STATUS', 'CREATED', 'ENCRYPTED', 'EXPIRES'];
  const body = rows.map((r) => [r.id, r.status, localTime(r.createdAt), bytes(r.ciphertextSizeBytes), localTime(r.expiresAt)]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  return [header, ...body].map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

export function registerList(program: Command): void {
  program
    .command('list')
    .description('list your backups, newest first')
    .option('--json', 'print the API response ({"backups": [...]})')
    .action(
      action(async ({ signal, config }, options: JsonOption) => {
        const list = await clientFor(config).listBackups(signal);
        if (options.json) return printJson(list);
        print(table(list.backups));
      }),
    );
}
