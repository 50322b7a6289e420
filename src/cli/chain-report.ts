/** `coffer list --chain`: the history chains of the listed backups, checked (src/client/chain.ts), in words. */
import { plural } from '../domain/words.js';
import fsp from 'node:fs/promises';
import {
  type BackupRecordBody,
  type ChainEntry,
  type ChainReport,
  checkChains,
  type CofferClient,
  KitFormatError,
  openChainEntries,
  parseKit,
  readChainHead,
  readChainHeads,
  wipe,
} from '../client/index.js';
import { type CommandContext, type PassphraseOptions } from './command-frame.js';
import { unlock } from './secrets.js';
import { CliError, EXIT, print, usageError } from './output.js';

const MAX_KIT_BYTES = 64 * 1024;

async function kitMaterial(file: string): Promise<Buffer> {
  let text: string;
  try {
    const stat = await fsp.stat(file);
    if (stat.size > MAX_KIT_BYTES) throw usageError(`--kit-file ${file} is too large to be a recovery kit`);
    text = await fsp.readFile(file, 'utf8');
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw usageError(`cannot read --kit-file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    return parseKit(text).material;
  } catch (error) {
    if (error instanceof KitFormatError) throw usageError(`invalid recovery kit: ${error.message}`);
    throw error;
  }
}

/**
 * Opens every READY backup's metadata (passphrase or kit), checks the chains against this host's remembered heads,
 * and returns the report with `finish`, which prints it (human) and ends with exit 4 when anything was found.
 */
export async function chainReport(
  context: CommandContext,
  client: CofferClient,
  backups: readonly BackupRecordBody[],
  options: PassphraseOptions & { kitFile?: string },
): Promise<{ report: ChainReport; finish(json: boolean): void }> {
  const material =
    options.kitFile !== undefined
      ? await kitMaterial(options.kitFile)
      : (await unlock(client, context.config, options, context.signal)).masterKey;
  try {
    return await checkedChains(context, await openChainEntries(client, material, backups, context.signal));
  } finally {
    wipe(material);
  }
}

/** The chains of `entries` checked against this host's remembered heads, with `finish` as chainReport's. */
export async function checkedChains(
  context: CommandContext,
  entries: readonly ChainEntry[],
): Promise<{ report: ChainReport; finish(json: boolean): void }> {
  const report = checkChains(entries, {
    now: Date.now(),
    localHeads: await readChainHeads(context.config.stateDir),
    ownHead: context.profile ? await readChainHead(context.config.stateDir, context.profile.name) : null,
  });
  return {
    report,
    finish(json) {
      if (!json) {
        print('');
        for (const chain of report.chains) {
          const local = chain.localSeq === null ? '' : `; this host made #${chain.localSeq}`;
          print(
            `chain ${chain.chainId.slice(0, 8)}: ${plural(chain.backups, 'backup')}, #${chain.firstSeq}-#${chain.lastSeq}${local}: ` +
              `${chain.ok ? 'ok' : 'PROBLEMS'}`,
          );
        }
        if (report.unchained.length > 0) {
          const made = `${plural(report.unchained.length, 'backup was', 'backups were')} made without a profile`;
          print(`${made}: only backups made with a profile (coffer run, coffer backup --profile) carry a history to check`);
        }
        for (const finding of report.findings) print(`${finding.kind}: ${finding.message}`);
        if (report.chains.length === 0 && report.findings.length === 0 && report.unchained.length === 0)
          print('no backups to check for a history');
      }
      if (report.findings.length > 0) {
        throw new CliError(
          `the history chains show ${plural(report.findings.length, 'problem')} the server's list does not explain`,
          EXIT.integrity,
        );
      }
    },
  };
}
