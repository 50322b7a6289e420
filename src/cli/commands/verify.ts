/** `coffer verify <id>… | --all | --sample <n>`: download and check backups whole, writing nothing (exit 0 or 4). */
import { plural } from '../../domain/words.js';
import type { Command } from 'commander';
import { type BackupRecordBody, type ChainEntry, chooseBackups, verifyBackup, type VerifyResult, wipe } from '../../client/index.js';
import { checkedChains } from '../chain-report.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { unlock } from '../secrets.js';
import { bytes } from '../format.js';
import { toCliError } from '../failures.js';
import { CliError, EXIT, print, printJson, usageError } from '../output.js';

type VerifyOptions = PassphraseOptions & { all?: boolean; sample?: string };

function line(result: VerifyResult): string {
  const m = result.metadata;
  switch (result.outcome) {
    case 'verified':
      return `verified ${result.backupId}: ${m?.name ?? '?'}, ${bytes(result.plaintextBytes)} (${m?.compression ?? '?'}); every chunk authenticated, final tag, sizes and SHA-256 match`;
    case 'failed':
      return `FAILED   ${result.backupId}: ${result.problem ?? 'integrity check failed'}`;
    default:
      return `could not verify ${result.backupId}: ${result.problem ?? 'unavailable'}`;
  }
}

/** The verified backups as chain entries: their sealed links, and the ciphertext SHA-256 that was downloaded. */
function chainEntries(listed: readonly BackupRecordBody[], results: readonly VerifyResult[]): ChainEntry[] {
  const records = new Map(listed.map((record) => [record.id, record]));
  return results.flatMap((result) => {
    const record = records.get(result.backupId);
    if (result.outcome !== 'verified' || !record || !result.metadata) return [];
    return [
      {
        backupId: record.id,
        createdAt: record.createdAt,
        expiresAt: record.expiresAt,
        metadata: result.metadata,
        ciphertextSha256: result.ciphertextSha256,
      },
    ];
  });
}

export function registerVerify(program: Command): void {
  program
    .command('verify [ids...]')
    .description(
      'download backups and check them whole (every chunk authenticated, final tag, sizes, ' +
        'SHA-256) without writing anything; exit 4 when one fails',
    )
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--all', 'verify every READY backup of the account and of its host accounts, and check their history chains')
    .option('--sample <n>', 'verify n READY backups picked at random (for a weekly timer)')
    .option(
      '--json',
      'print {"results": [{"backupId", "outcome": "verified|failed|unavailable", "problem"?, …}], "verified", "failed", "unavailable"}',
    )
    .action(
      action(async (context, ids: string[], options: VerifyOptions) => {
        const { signal, config } = context;
        const chosen = [ids.length > 0, !!options.all, options.sample !== undefined].filter(Boolean).length;
        if (chosen !== 1) throw usageError('say which backups to verify: their ids, --all, or --sample <n>');
        const sample = options.sample === undefined ? undefined : Number(options.sample);
        if (sample !== undefined && (!Number.isSafeInteger(sample) || sample < 1))
          throw usageError('--sample takes a whole number of backups, 1 or more');
        const client = clientFor(config);
        const { masterKey } = await unlock(client, config, options, signal);
        try {
          // Every backup the key reads: the account's own and its host accounts' (docs/client.md#hosts-with-their-own-schedule).
          const every = ids.length > 0 ? undefined : await client.listEveryBackup(signal);
          const listed = every ? [...every.backups, ...every.hosts.flatMap((host) => host.backups)] : [];
          const targets = ids.length > 0 ? ids : chooseBackups(listed, { all: options.all, sample });
          const results: VerifyResult[] = [];
          for (const id of targets) {
            const result = await verifyBackup(id, { client, masterKey, signal, explain: (error) => toCliError(error, false).message });
            results.push(result);
            if (!options.json) print(line(result));
          }
          // Only the whole list can show what is missing from it: --all also checks the history chains.
          const chains = options.all ? await checkedChains(context, chainEntries(listed, results)) : undefined;
          const count = (outcome: VerifyResult['outcome']) => results.filter((r) => r.outcome === outcome).length;
          const summary = { verified: count('verified'), failed: count('failed'), unavailable: count('unavailable') };
          if (options.json)
            printJson({
              results: results.map(({ metadata: _sealed, ...rest }) => rest),
              ...summary,
              ...(chains ? { chains: chains.report } : {}),
            });
          else if (targets.length === 0) print('no READY backups to verify');
          else print(`${summary.verified} verified, ${summary.failed} failed, ${summary.unavailable} could not be verified`);
          if (summary.failed > 0) throw new CliError(`${plural(summary.failed, 'backup')} failed verification`, EXIT.integrity);
          if (summary.unavailable > 0) throw new CliError(`${plural(summary.unavailable, 'backup')} could not be verified`, EXIT.failure);
          chains?.finish(!!options.json);
        } finally {
          wipe(masterKey);
        }
      }),
    );
}
