/**
 * `coffer verify <id>… | --all | --sample <n> [--drill]`: download and check backups whole, writing nothing (exit 0
 * or 4); with --drill, also record each result at the server as a restore drill's attestation
 * (docs/client.md#restore-drills).
 */
import { plural } from '../../domain/words.js';
import type { Command } from 'commander';
import {
  type BackupRecordBody,
  type ChainEntry,
  chooseBackups,
  CofferApiError,
  type CofferClient,
  verifyBackup,
  type VerifyResult,
  wipe,
} from '../../client/index.js';
import { VERSION } from '../../lib/version.js';
import { checkedChains } from '../chain-report.js';
import { action, type CommandContext, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { readKit, unlock } from '../secrets.js';
import { bytes } from '../format.js';
import { toCliError } from '../failures.js';
import { CliError, EXIT, note, print, printJson, usageError } from '../output.js';
import { accountsOf, type DrillReport, drillBackups, drillLine, NO_DRILL_ROUTE } from '../agent/drill.js';
import { DRILL_ON_A_HOST, drillNeedsRead, drillWithAppendOnlyKey, serverRecordsNoDrills } from '../error-texts.js';

type VerifyOptions = PassphraseOptions & { all?: boolean; sample?: string; drill?: boolean; kitFile?: string };

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

/** A drill's fields in --json: its result, whether it was recorded (the attestation's id) and why not. */
function drillFields(report: DrillReport | undefined) {
  if (!report) return {};
  const { result, recorded, attestationId, notRecorded } = report;
  return { drill: { result, recorded, ...(attestationId ? { attestationId } : {}), ...(notRecorded ? { notRecorded } : {}) } };
}

/**
 * Where drills may run (docs/client.md#restore-drills): a machine with the passphrase or the kit, and a key that may
 * read backups. Refused before anything is downloaded; returns the caller's own account id (named in attestations).
 */
async function drillingAccount(client: CofferClient, context: CommandContext, options: VerifyOptions): Promise<string> {
  const { config, signal } = context;
  if (options.kitFile === undefined && options.passphraseFile === undefined && config.recipient !== null && config.passphrase === null) {
    throw usageError(DRILL_ON_A_HOST);
  }
  let read;
  try {
    read = await client.readAccount(signal);
  } catch (error) {
    if (error instanceof CofferApiError && error.code === 'insufficient_scope') throw new CliError(drillNeedsRead(), EXIT.usage);
    throw error;
  }
  if (options.kitFile === undefined && read.account.initialized && read.account.wrappedMasterKey === null) {
    throw new CliError(drillWithAppendOnlyKey(), EXIT.usage);
  }
  if (read.accountId === undefined) throw new CliError(serverRecordsNoDrills(VERSION, 'it does not name the account of this key'));
  return read.accountId;
}

/** The vault's key material: the kit's (--kit-file), else the passphrase's. A secure buffer: wipe it when done. */
async function keyMaterial(client: CofferClient, context: CommandContext, options: VerifyOptions): Promise<Buffer> {
  if (options.kitFile !== undefined) return (await readKit(options.kitFile, context.config, 'read')).material;
  return (await unlock(client, context.config, options, context.signal)).masterKey;
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
      '--drill',
      'a restore drill: also record each result at the server, authenticated with the vault key (needs the passphrase or the kit)',
    )
    .option('--kit-file <file>', 'open the backups with the recovery kit (`coffer kit`) instead of the passphrase (`-`: stdin)')
    .option(
      '--json',
      'print {"results": [{"backupId", "outcome": "verified|failed|unavailable", "problem"?, "drill"?, …}], "verified", "failed", "unavailable"}',
    )
    .action(
      action(async (context, ids: string[], options: VerifyOptions) => {
        const { signal, config } = context;
        const chosen = [ids.length > 0, !!options.all, options.sample !== undefined].filter(Boolean).length;
        if (chosen !== 1) throw usageError('say which backups to verify: their ids, --all, or --sample <n>');
        const sample = options.sample === undefined ? undefined : Number(options.sample);
        if (sample !== undefined && (!Number.isSafeInteger(sample) || sample < 1))
          throw usageError('--sample takes a whole number of backups, 1 or more');
        if (options.kitFile !== undefined && options.passphraseFile !== undefined) {
          throw usageError('--kit-file and --passphrase-file exclude each other: the kit replaces the passphrase');
        }
        const client = clientFor(config);
        const ownAccountId = options.drill ? await drillingAccount(client, context, options) : undefined;
        const masterKey = await keyMaterial(client, context, options);
        try {
          // Every backup the key reads: the account's own and its host accounts' (docs/client.md#hosts-with-their-own-schedule).
          // A drill names the account that holds each backup, so it lists them also for ids given.
          const every = ids.length > 0 && !options.drill ? undefined : await client.listEveryBackup(signal);
          const listed = every ? [...every.backups, ...every.hosts.flatMap((host) => host.backups)] : [];
          const targets = ids.length > 0 ? ids : chooseBackups(listed, { all: options.all, sample });
          const explain = (error: unknown) => toCliError(error, false).message;
          const results: VerifyResult[] = [];
          const drills = new Map<string, DrillReport>();
          if (ownAccountId !== undefined && every) {
            const holders = accountsOf(ownAccountId, every);
            const drilled = await drillBackups(
              targets.map((backupId) => ({ backupId, accountId: holders.get(backupId) ?? ownAccountId })),
              {
                client,
                material: masterKey,
                signal,
                explain,
                onReport: (report) => {
                  if (!options.json) print(`${line(report.verify)}\n${drillLine(report)}`);
                },
              },
            );
            for (const report of drilled.reports) {
              results.push(report.verify);
              drills.set(report.backupId, report);
            }
            if (!drilled.serverRecords) note(serverRecordsNoDrills(VERSION, 'the verification above still stands'));
          } else {
            for (const id of targets) {
              const result = await verifyBackup(id, { client, masterKey, signal, explain });
              results.push(result);
              if (!options.json) print(line(result));
            }
          }
          // Only the whole list can show what is missing from it: --all also checks the history chains.
          const chains = options.all ? await checkedChains(context, chainEntries(listed, results)) : undefined;
          const count = (outcome: VerifyResult['outcome']) => results.filter((r) => r.outcome === outcome).length;
          const summary = { verified: count('verified'), failed: count('failed'), unavailable: count('unavailable') };
          const recorded = [...drills.values()].filter((report) => report.recorded).length;
          // Not recorded for another reason than an older server (which `note` named): the drill asked for is missing.
          const unrecorded = [...drills.values()].filter((r) => r.result !== 'not-run' && !r.recorded && r.notRecorded !== NO_DRILL_ROUTE);
          if (options.json)
            printJson({
              results: results.map(({ metadata: _sealed, ...rest }) => ({ ...rest, ...drillFields(drills.get(rest.backupId)) })),
              ...summary,
              ...(options.drill ? { drills: { recorded, notRecorded: drills.size - recorded } } : {}),
              ...(chains ? { chains: chains.report } : {}),
            });
          else if (targets.length === 0) print('no READY backups to verify');
          else {
            const drilled = options.drill ? `; ${plural(recorded, 'drill')} recorded` : '';
            print(`${summary.verified} verified, ${summary.failed} failed, ${summary.unavailable} could not be verified${drilled}`);
          }
          if (summary.failed > 0) throw new CliError(`${plural(summary.failed, 'backup')} failed verification`, EXIT.integrity);
          if (summary.unavailable > 0) throw new CliError(`${plural(summary.unavailable, 'backup')} could not be verified`, EXIT.failure);
          if (unrecorded.length > 0) throw new CliError(`${plural(unrecorded.length, 'drill')} could not be recorded`, EXIT.failure);
          chains?.finish(!!options.json);
        } finally {
          wipe(masterKey);
        }
      }),
    );
}
