/** `coffer verify <id>… | --all | --sample <n>`: download and check backups whole, writing nothing (exit 0 or 4). */
import type { Command } from 'commander';
import { wipe } from '../../client/envelope.js';
import { chooseBackups, verifyBackup, type VerifyResult } from '../../client/inspect.js';
import { action, bytes, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions, toCliError, unlock } from '../client-io.js';
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

export function registerVerify(program: Command): void {
  program
    .command('verify [ids...]')
    .description(
      'download backups and check them whole (every chunk authenticated, final tag, sizes, SHA-256) without writing anything; exit 4 when one fails',
    )
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--all', 'verify every READY backup of the account')
    .option('--sample <n>', 'verify n READY backups picked at random (for a weekly timer)')
    .option('--json', 'print {"results": [{"backupId", "outcome": "verified|failed|unavailable", "problem"?, …}], "verified", "failed", "unavailable"}')
    .action(
      action(async ({ signal, config }, ids: string[], options: VerifyOptions) => {
        const chosen = [ids.length > 0, !!options.all, options.sample !== undefined].filter(Boolean).length;
        if (chosen !== 1) throw usageError('say which backups to verify: their ids, --all, or --sample <n>');
        const sample = options.sample === undefined ? undefined : Number(options.sample);
        if (sample !== undefined && (!Number.isSafeInteger(sample) || sample < 1)) throw usageError('--sample takes a whole number of backups, 1 or more');
        const client = clientFor(config);
        const { masterKey } = await unlock(client, config, options, signal);
        try {
          const targets = ids.length > 0 ? ids : chooseBackups((await client.listBackups(signal)).backups, { all: options.all, sample });
          const results: VerifyResult[] = [];
          for (const id of targets) {
            const result = await verifyBackup(id, { client, masterKey, signal, explain: (error) => toCliError(error, false).message });
            results.push(result);
            if (!options.json) print(line(result));
          }
          const count = (outcome: VerifyResult['outcome']) => results.filter((r) => r.outcome === outcome).length;
          const summary = { verified: count('verified'), failed: count('failed'), unavailable: count('unavailable') };
          if (options.json) printJson({ results: results.map(({ metadata: _sealed, ...rest }) => rest), ...summary });
          else if (targets.length === 0) print('no READY backups to verify');
          else print(`${summary.verified} verified, ${summary.failed} failed, ${summary.unavailable} could not be verified`);
          if (summary.failed > 0) throw new CliError(`${summary.failed} backup(s) failed verification`, EXIT.integrity);
          if (summary.unavailable > 0) throw new CliError(`${summary.unavailable} backup(s) could not be verified`, EXIT.failure);
        } finally {
          wipe(masterKey);
        }
      }),
    );
}
