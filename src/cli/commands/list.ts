/** `coffer list`: the account's backups, newest first, then its host accounts'; with --chain, their history chains checked. */
import type { Command } from 'commander';
import { chainReport } from '../chain-report.js';
import type { BackupRecordBody, HostBackups } from '../../client/index.js';
import { action, clientFor, type JsonOption, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { bytes, localTime } from '../format.js';
import { print, printJson } from '../output.js';

function table(rows: BackupRecordBody[]): string {
  if (rows.length === 0) return 'no backups';
  const header = ['ID', 'STATUS', 'CREATED', 'ENCRYPTED', 'EXPIRES'];
  const body = rows.map((r) => [r.id, r.status, localTime(r.createdAt), bytes(r.ciphertextSizeBytes), localTime(r.expiresAt)]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  return [header, ...body]
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** A host account's backups under its own heading: its label, account and cadence. */
function hostSection(host: HostBackups): string {
  const vault = host.vault === 'shared' ? '' : host.vault === 'none' ? ' (no vault)' : " (its vault is not this account's any more)";
  return [
    `host ${host.label}: account ${host.accountId}, its own schedule (every ${host.backupInterval})${vault}`,
    table(host.backups),
  ].join('\n');
}

type ListOptions = JsonOption & PassphraseOptions & { chain?: boolean; kitFile?: string };

export function registerList(program: Command): void {
  program
    .command('list')
    .description("list your backups, newest first, then each host account's")
    .option('--chain', 'also check the history chains (gaps, rollbacks, reordering): decrypts the metadata, asks for the passphrase')
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--kit-file <file>', 'with --chain: open the metadata with the recovery kit instead of the passphrase')
    .option(
      '--json',
      'print the API response ({"backups": [...]}; "hosts": [{accountId, label, backupInterval, vault, ' +
        'backups}] when you have host accounts; with --chain also "chains")',
    )
    .action(
      action(async (context, options: ListOptions) => {
        const client = clientFor(context.config);
        const { hosts, ...list } = await client.listEveryBackup(context.signal);
        const every = [...list.backups, ...hosts.flatMap((host) => host.backups)];
        const chains = options.chain ? await chainReport(context, client, every, options) : undefined;
        // The API's own list; the host accounts' lists beside it, only when there are any.
        const body = { ...list, ...(hosts.length > 0 ? { hosts } : {}) };
        if (options.json) printJson(chains ? { ...body, chains: chains.report } : body);
        else print([table(list.backups), ...hosts.map(hostSection)].join('\n\n'));
        chains?.finish(!!options.json);
      }),
    );
}
