/** `coffer backup <path>…` (or `--stdin`): tar → zstd/gzip → encrypt → upload, streamed. */
import { plural } from '../../domain/words.js';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { Command } from 'commander';
import fsp from 'node:fs/promises';
import {
  type BackupEvent,
  type BackupResult,
  chainForProfile,
  type Compression,
  COMPRESSIONS,
  EmptyStreamError,
  fsReason,
  requireSealableVault,
  ruleLines,
  runBackup,
  type StreamSource,
  wipe,
  zstdAvailable,
} from '../../client/index.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions, recipientFor } from '../command-frame.js';
import { passphraseGiven, requireVaultRecipient, unlock } from '../secrets.js';
import { progressBar } from '../progress.js';
import { bytes, localTime } from '../format.js';
import { CliError, note, print, printJson, usageError } from '../output.js';

type BackupOptions = PassphraseOptions & {
  name?: string;
  hostappVersion?: string;
  recipient?: string;
  exclude: string[];
  excludeFile: string[];
  skipUnreadable?: boolean;
  stdin?: boolean;
  stdinName?: string;
  stdinFromCommand?: boolean;
  compression?: string;
};

const collect = (value: string, previous: string[]) => [...previous, value];

/** The patterns of --exclude and of every --exclude-file, in order. */
async function excludePatterns(options: BackupOptions): Promise<string[]> {
  const patterns = [...options.exclude];
  for (const file of options.excludeFile) {
    const text = await fsp.readFile(file, 'utf8').catch((error: unknown) => {
      throw usageError(`cannot read --exclude-file ${file}: ${fsReason(error)}`);
    });
    patterns.push(...ruleLines(text));
  }
  return patterns;
}

function compressionOf(option: string | undefined): Compression | undefined {
  if (option === undefined) return undefined;
  if (!(COMPRESSIONS as readonly string[]).includes(option)) throw usageError(`unknown compression "${option}" (expected gzip or zstd)`);
  if (option === 'zstd' && !zstdAvailable())
    throw usageError(`this Node.js (${process.version}) has no zstd compressor (22.15 and later have one): use gzip`);
  return option as Compression;
}

/**
 * The stream of --stdin, or of the command of --stdin-from-command. A command's exit status is known, so a
 * command that fails (non-zero exit, killed by a signal) fails the backup before it is finalized. Standard input
 * only tells its end: a producer that dies early in `producer | coffer backup --stdin` looks like a short
 * stream (the shell's pipefail reports it only after the backup was finalized), which is why
 * --stdin-from-command exists.
 */
function streamSource(
  options: BackupOptions,
  command: string[],
): { source: StreamSource; stop: () => void; failure: () => Promise<unknown> } {
  const name = options.stdinName ?? 'stdin';
  if (!options.stdinFromCommand) {
    if (process.stdin.isTTY)
      throw usageError('--stdin reads a pipe, not the terminal: pipe the data in (producer | coffer backup --stdin)');
    return { source: { stream: process.stdin, name }, stop: () => undefined, failure: () => Promise.resolve(undefined) };
  }
  const [program, ...args] = command;
  if (!program)
    throw usageError('--stdin-from-command needs the command after the options: coffer backup --stdin-from-command -- pg_dump db');
  const shown = JSON.stringify(program);
  // The command runs only when runBackup starts the stream, once the server has opened the backup's slot: a
  // refused backup (cadence, quota, auth, no vault) never runs it.
  let child: ChildProcessByStdio<null, Readable, null> | undefined;
  let exited: Promise<void> | undefined;
  const start = () => {
    const started = spawn(program, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    child = started;
    exited = new Promise<void>((resolve, reject) => {
      started.once('error', (error) =>
        reject(new CliError(`cannot run ${shown}: ${fsReason(error)}; nothing was uploaded and its upload slot was freed`)),
      );
      started.once('close', (code, signal) => {
        if (code === 0) resolve();
        else {
          const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
          reject(new CliError(`the command ${shown} ${how}: the backup was not finalized and its upload slot was freed`));
        }
      });
    });
    exited.catch(() => undefined); // awaited by ended() or failure()
    return started.stdout;
  };
  return {
    source: { stream: start, name, ended: () => exited ?? Promise.resolve() },
    stop: () => {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    },
    failure: () =>
      (exited ?? Promise.resolve()).then(
        () => undefined,
        (error: unknown) => error,
      ),
  };
}

export function registerBackup(program: Command): void {
  program
    .command('backup [paths...]')
    .description(
      'encrypt directories and files (or a stream) locally and upload them as one backup: tar → zstd or gzip → encrypt → upload, streamed',
    )
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--name <name>', 'name kept in the encrypted metadata (default: the base name of the first path)')
    .option('--hostapp-version <version>', 'version of the application whose data this is (stored in clear)')
    .option(
      '--recipient <recipient>',
      'seal the backup to this recipient (`coffer recipient` prints it; else COFFER_RECIPIENT): no passphrase needed, and this host cannot restore it',
    )
    .option(
      '--exclude <pattern>',
      'leave out what this gitignore-style pattern matches (repeatable); .cofferignore files in the tree count too',
      collect,
      [],
    )
    .option('--exclude-file <file>', 'read exclude patterns from this file, one per line, gitignore syntax (repeatable)', collect, [])
    .option('--skip-unreadable', 'back up what can be read and list what cannot (default: fail, naming every unreadable file)')
    .option('--stdin', 'back up standard input as one file (see --stdin-name); for a producing command prefer --stdin-from-command')
    .option('--stdin-name <name>', 'the file name of a --stdin backup (default: stdin)')
    .option('--stdin-from-command', 'run the command given after -- and back up its output as one file; its failure fails the backup')
    .option('--compression <gzip|zstd>', `default: zstd where this Node has it (${zstdAvailable() ? 'it does' : 'it does not'}), else gzip`)
    .option(
      '--json',
      'print the READY backup (BackupDetail) as JSON (with recipientFingerprint when sealed to ' +
        'a recipient, skipped when entries were left out)',
    )
    .action(
      action(async ({ signal, config, profile, recipientFrom }, paths: string[], options: BackupOptions) => {
        const recipient = recipientFor(options.recipient, config);
        const sealedFrom = options.recipient !== undefined ? '--recipient' : (recipientFrom ?? 'COFFER_RECIPIENT');
        const compression = compressionOf(options.compression);
        const { streaming, exclude } = await whatToBackUp(paths, options);
        const client = clientFor(config);
        let masterKey: Buffer | undefined;
        if (recipient) {
          const account = await requireSealableVault(client, signal);
          // The key reads the vault and the passphrase is at hand (never asked for): a recipient of another vault
          // is refused here, before anything is uploaded.
          if (account && passphraseGiven(config, options)) await requireVaultRecipient(account, config, options, recipient, sealedFrom);
        } else ({ masterKey } = await unlock(client, config, options, signal));
        // Which profile and recipient this backup uses; a plain passphrase backup with neither has nothing to add.
        if (profile || recipient) {
          note(
            `${profile ? `profile ${profile.name}` : 'no profile'}: ` +
              (recipient
                ? `sealing to recipient ${recipient.fingerprint} (from ${sealedFrom})`
                : 'encrypting with the vault key opened by the passphrase'),
          );
        }
        const stream = streaming ? streamSource(options, paths) : undefined;
        const bar = progressBar(stream ? 'reading + encrypting + uploading' : 'encrypting + uploading', !!options.json);
        const onEvent = backupEvents(bar, !!stream, !!options.json);
        try {
          // With a profile, the backup is the next link of its history chain (docs/crypto.md §3a).
          const chain = profile ? await chainForProfile(config.stateDir, profile.name) : undefined;
          const result = await runBackup({
            client,
            ...(recipient ? { recipient } : { masterKey }),
            ...(stream ? { stream: stream.source } : { sources: paths, exclude, skipUnreadable: !!options.skipUnreadable }),
            compression,
            name: options.name,
            hostappVersion: options.hostappVersion,
            maxArchiveBytes: config.maxArchiveBytes ?? undefined,
            ownerName: config.ownerName,
            chain: chain?.link,
            signal,
            onEvent,
          }).catch(async (error: unknown) => {
            stream?.stop();
            // A command that produced nothing most likely failed: its own failure says more.
            if (error instanceof EmptyStreamError && stream) {
              const failed = await stream.failure();
              if (failed) throw failed;
              if (options.stdinFromCommand) {
                throw new CliError(
                  `the command ${JSON.stringify(paths[0])} wrote nothing to its standard output: nothing was uploaded and its upload slot was freed`,
                );
              }
            }
            throw error;
          });
          const skewWarning = await chain?.record(result);
          if (skewWarning) process.stderr.write(`${skewWarning}\n`);
          bar.stop();
          reportBackup(result, options, recipient);
        } finally {
          bar.stop();
          wipe(masterKey);
        }
      }),
    );
}

/** The arguments checked (streaming or paths, never both; every path there) and the exclude patterns read. */
async function whatToBackUp(paths: string[], options: BackupOptions): Promise<{ streaming: boolean; exclude: string[] }> {
  const streaming = !!options.stdin || !!options.stdinFromCommand;
  if (options.stdin && options.stdinFromCommand) throw usageError('--stdin and --stdin-from-command exclude each other');
  if (options.stdinName !== undefined && !streaming) throw usageError('--stdin-name goes with --stdin or --stdin-from-command');
  if (options.stdin && paths.length > 0) throw usageError('--stdin backs up standard input: give no paths with it');
  if (!streaming && paths.length === 0) throw usageError('nothing to back up: give one or more paths, or --stdin');
  const exclude = streaming ? [] : await excludePatterns(options);
  if (!streaming) {
    for (const source of paths) {
      await fsp.lstat(source).catch((error: unknown) => {
        throw usageError(`cannot back up ${source}: ${fsReason(error)}`);
      });
    }
  }
  return { streaming, exclude };
}

/** What the backup's events show: the progress bar, and a note for each step that is not the usual. */
function backupEvents(bar: ReturnType<typeof progressBar>, streamed: boolean, json: boolean): (event: BackupEvent) => void {
  return (event) => {
    if (event.type === 'progress') bar.update(event.plaintextBytes, streamed ? undefined : event.estimatedPlaintextBytes);
    else if (event.type === 'uploaded') bar.complete();
    else if (event.type === 'measuring' && !json) note(`${event.reason}…`);
    else if (event.type === 'slot' && event.reused) note(`resuming the open upload slot ${event.backupId}`);
    else if (event.type === 'replaced') note(`deleted the unfinished upload ${event.backupId} (it can never be finalized)`);
    else if (event.type === 'slot-deleted') note(`deleted the upload slot ${event.backupId}`);
    else if (event.type === 'store-unreachable') note(`${event.reason}: uploading through the server instead`);
  };
}

/** The READY backup, as JSON or in words (with what was left out, and the recipient it is sealed to). */
function reportBackup(result: BackupResult, options: BackupOptions, recipient: ReturnType<typeof recipientFor>): void {
  const { detail, metadata, skipped } = result;
  if (options.json) {
    printJson({
      ...detail,
      ...(recipient ? { recipientFingerprint: recipient.fingerprint } : {}),
      ...(skipped.length > 0 ? { skipped } : {}),
    });
    return;
  }
  for (const entry of skipped) note(`skipped ${entry.path}: ${entry.reason}`);
  const what =
    metadata.archive === 'raw'
      ? `"${metadata.name}" from ${options.stdin ? 'standard input' : 'the command'}`
      : plural(metadata.fileCount, 'file');
  print(
    `backup ${detail.id} ${detail.status}: ${what}, ${bytes(metadata.plaintextSizeBytes)} archived, ` +
      `${bytes(detail.ciphertextSizeBytes)} encrypted (${metadata.compression}); kept until ${localTime(detail.expiresAt)}`,
  );
  if (skipped.length > 0)
    print(`${plural(skipped.length, 'entry was', 'entries were')} left out (listed above and in the backup's sealed metadata)`);
  if (recipient) print(`sealed to recipient ${recipient.fingerprint}`);
}
