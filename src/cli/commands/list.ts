/** `coffer list`: the account's backups, newest first; with --chain, their history chains checked. */
import type { Command } from 'commander';
import { chainReport } from '../chain-report.js';
import type { BackupRecordBody } from '../../client/sdk.js';
import { action, bytes, clientFor, type JsonOption, localTime, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../client-io.js';
import { print, printJson } from '../output.js';

function table(rows: BackupRecordBody[]): string {
  if (rows.length === 0) return 'no backups';
  const header = ['ID', 'STATUS', 'CREATED', 'ENCRYPTED', 'EXPIRES'];
  const body = rows.map((r) => [r.id, r.status, localTime(r.createdAt), bytes(r.ciphertextSizeBytes), localTime(r.expiresAt)]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  return [header, ...body].map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

type ListOptions = JsonOption & PassphraseOptions & { chain?: boolean; kitFile?: string };

export function registerList(program: Command): void {
  program
    .command('list')
    .description('list your backups, newest first')
    .option('--chain', 'also check the history chains (gaps, rollbacks, reordering): decrypts the metadata, asks for the passphrase')
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--kit-file <file>', 'with --chain: open the metadata with the recovery kit instead of the passphrase')
    .option('--json', 'print the API response ({"backups": [...]}; with --chain also "chains")')
    .action(
      action(async (run, options: ListOptions) => {
        const client = clientFor(run.config);
        const list = await client.listBackups(run.signal);
        const chains = options.chain ? await chainReport(run, client, list.backups, options) : undefined;
        if (options.json) printJson(chains ? { ...list, chains: chains.report } : list);
        else print(table(list.backups));
        chains?.finish(!!options.json);
      }),
    );
}
