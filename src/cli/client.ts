/**
 * The zero-knowledge client commands (docs/client.md): init, recipient, backup, list, show, restore, delete, watch,
 * passphrase, reset. Configuration: COFFER_URL (default http://localhost:8080), COFFER_API_KEY, and the
 * passphrase from --passphrase-file, COFFER_PASSPHRASE or a no-echo prompt (never an argument).
 * `--json` prints the API's own JSON; human text otherwise. Exit codes: 0 ok, 1 failure, 2 usage,
 * 3 cadence limit (429), 4 integrity failure, 130 interrupted (SIGINT/SIGTERM, after cleanup).
 */
import fsp from 'node:fs/promises';
import type { Command } from 'commander';
import { runBackup, type BackupEvent } from '../client/backup.js';
import { deriveRecipient, openMetadata, unwrapDek, wipe, KDF_PROFILES, type BackupMetadata } from '../client/envelope.js';
import { fsReason } from '../client/fs-errors.js';
import { checkTarget, runRestore } from '../client/restore.js';
import type { BackupDetailBody, BackupRecordBody, CofferClient } from '../client/sdk.js';
import { changePassphrase, initVault, requireSealableVault, unlockVault } from '../client/vault.js';
import { watchBackup } from '../client/watch.js';
import { type ClientConfig, loadClientConfig } from '../config.js';
import {
  bytes,
  clientFor,
  confirmOnTerminal,
  interruptible,
  kdfProfile,
  localTime,
  progressBar,
  readNewPassphrase,
  readPassphrase,
  recipientFor,
  toCliError,
} from './client-io.js';
import { CliError, EXIT, usageError, writeHuman } from './output.js';

interface JsonOption {
  json?: boolean;
}
interface PassphraseOptions extends JsonOption {
  passphraseFile?: string;
}

/** Human text: much of it comes from the server, so it goes through writeHuman (no terminal controls). */
const print = (text: string): void => writeHuman(process.stdout, text);
const note = (text: string): void => writeHuman(process.stderr, text);
const printJson = (value: unknown): void => void process.stdout.write(`${JSON.stringify(value)}\n`);

/** What every command body gets: the CLI's abort signal and the client's settings. */
interface Run {
  signal: AbortSignal;
  config: ClientConfig;
}

/**
 * Runs a command body with the CLI's abort signal (Ctrl-C, SIGTERM) and the settings from the environment,
 * mapping every failure to the right exit code and message. After an interruption, whatever broke first, the
 * command ends as "interrupted" (exit 130) once its cleanup is done.
 */
function action<A extends unknown[]>(body: (run: Run, ...args: A) => Promise<void>) {
  return async (...args: A): Promise<void> => {
    const options = args.find((a): a is JsonOption => typeof a === 'object' && a !== null && !Array.isArray(a)) ?? {};
    const { signal, dispose } = interruptible();
    try {
      await body({ signal, config: loadClientConfig() }, ...args);
    } catch (error) {
      throw toCliError(signal.aborted ? signal.reason : error, !!options.json);
    } finally {
      dispose();
    }
  };
}

async function unlock(client: CofferClient, config: ClientConfig, options: PassphraseOptions, signal: AbortSignal) {
  const passphrase = await readPassphrase(config, { passphraseFile: options.passphraseFile, signal });
  return unlockVault(client, passphrase, signal);
}

function recordLines(record: BackupRecordBody | BackupDetailBody): string[] {
  return [
    `id:          ${record.id}`,
    `status:      ${record.status}`,
    `created:     ${localTime(record.createdAt)}`,
    `expires:     ${localTime(record.expiresAt)}`,
    `encrypted:   ${bytes(record.ciphertextSizeBytes)}`,
    `plaintext:   ${bytes(record.plaintextSizeBytes)}`,
    `client:      ${record.clientVersion ?? '-'}`,
    ...(record.hostappVersion ? [`hostapp:     ${record.hostappVersion}`] : []),
  ];
}

function metadataLines(metadata: BackupMetadata): string[] {
  return [
    `name:        ${metadata.name}`,
    `source:      ${metadata.sourcePath}`,
    `contents:    ${metadata.fileCount} files, ${metadata.directoryCount} directories, ${metadata.symlinkCount} symlinks`,
    `sha-256:     ${metadata.plaintextSha256}`,
    `made at:     ${localTime(metadata.createdAt)}`,
  ];
}

function table(rows: BackupRecordBody[]): string {
  if (rows.length === 0) return 'no backups';
  const header = ['ID', 'STATUS', 'CREATED', 'ENCRYPTED', 'EXPIRES'];
  const body = rows.map((r) => [r.id, r.status, localTime(r.createdAt), bytes(r.ciphertextSizeBytes), localTime(r.expiresAt)]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  return [header, ...body].map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

export function registerClientCommands(program: Command): void {
  const passphraseFile = ['--passphrase-file <file>', 'read the passphrase from this file (else COFFER_PASSPHRASE, else a prompt)'] as const;
  const kdfOption = [
    '--kdf <profile>',
    `Argon2id cost for the new wrapping: ${Object.keys(KDF_PROFILES).join(' | ')} (default COFFER_KDF or moderate)`,
  ] as const;

  program
    .command('init')
    .description('create the vault: a master key wrapped under your passphrase (the passphrase never leaves this machine)')
    .option(...passphraseFile)
    .option(...kdfOption)
    .option('--json', 'print the API response as JSON')
    .action(
      action(async ({ signal, config }, options: PassphraseOptions & { kdf?: string }) => {
        const profile = kdfProfile(options.kdf, config);
        const client = clientFor(config);
        const passphrase = await readPassphrase(config, { passphraseFile: options.passphraseFile, confirm: true, signal });
        const result = await initVault(client, passphrase, profile, signal);
        if (options.json) return printJson(result);
        const { opslimit, memlimit } = KDF_PROFILES[profile];
        print(`vault initialized (Argon2id ${profile}: opslimit ${opslimit}, memlimit ${bytes(memlimit)}).`);
        print('Keep the passphrase safe: without it no backup can be restored, and nobody can recover it.');
      }),
    );

  program
    .command('backup <path>')
    .description('encrypt a directory (or a file) locally and upload it: tar → gzip → encrypt → upload, streamed')
    .option(...passphraseFile)
    .option('--name <name>', 'name kept in the encrypted metadata (default: the base name of <path>)')
    .option('--hostapp-version <version>', 'version of the application whose data this is (stored in clear)')
    .option(
      '--recipient <recipient>',
      'seal the backup to this recipient (`coffer recipient` prints it; else COFFER_RECIPIENT): no passphrase needed, and this host cannot restore it',
    )
    .option('--json', 'print the READY backup (BackupDetail) as JSON (with recipientFingerprint when sealed to a recipient)')
    .action(
      action(async ({ signal, config }, source: string, options: PassphraseOptions & { name?: string; hostappVersion?: string; recipient?: string }) => {
        const recipient = recipientFor(options.recipient, config);
        await fsp.lstat(source).catch((error: unknown) => {
          throw usageError(`cannot back up ${source}: ${fsReason(error)}`);
        });
        const client = clientFor(config);
        let masterKey: Buffer | undefined;
        if (recipient) await requireSealableVault(client, signal);
        else ({ masterKey } = await unlock(client, config, options, signal));
        const bar = progressBar('encrypting + uploading', !!options.json);
        const onEvent = (event: BackupEvent) => {
          if (event.type === 'progress') bar.update(event.plaintextBytes, event.estimatedPlaintextBytes);
          else if (event.type === 'uploaded') bar.complete();
          else if (event.type === 'measuring' && !options.json) note(`${event.reason}…`);
          else if (event.type === 'slot' && event.reused) note(`resuming the open upload slot ${event.backupId}`);
          else if (event.type === 'replaced') note(`deleted the unfinished upload ${event.backupId} (it can never be finalized)`);
          else if (event.type === 'slot-deleted') note(`deleted the upload slot ${event.backupId}`);
        };
        try {
          const { detail, metadata } = await runBackup({
            client,
            ...(recipient ? { recipient } : { masterKey }),
            source,
            name: options.name,
            hostappVersion: options.hostappVersion,
            maxArchiveBytes: config.maxArchiveBytes ?? undefined,
            signal,
            onEvent,
          });
          bar.stop();
          if (options.json) return printJson(recipient ? { ...detail, recipientFingerprint: recipient.fingerprint } : detail);
          print(
            `backup ${detail.id} ${detail.status}: ${metadata.fileCount} files, ${bytes(metadata.plaintextSizeBytes)} archived, ` +
              `${bytes(detail.ciphertextSizeBytes)} encrypted; kept until ${localTime(detail.expiresAt)}`,
          );
          if (recipient) print(`sealed to recipient ${recipient.fingerprint}`);
        } finally {
          bar.stop();
          wipe(masterKey);
        }
      }),
    );

  program
    .command('recipient')
    .description('print the vault\'s recipient (and its fingerprint): a backup host given it can back up without the passphrase, never restore')
    .option(...passphraseFile)
    .option('--json', 'print {"recipient": ..., "fingerprint": ...}')
    .action(
      action(async ({ signal, config }, options: PassphraseOptions) => {
        const { masterKey } = await unlock(clientFor(config), config, options, signal);
        try {
          const recipient = deriveRecipient(masterKey);
          if (options.json) return printJson({ recipient: recipient.text, fingerprint: recipient.fingerprint });
          // The string alone on stdout, so COFFER_RECIPIENT=$(coffer recipient) works; the fingerprint beside it.
          print(recipient.text);
          note(`fingerprint ${recipient.fingerprint}`);
        } finally {
          wipe(masterKey);
        }
      }),
    );

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

  program
    .command('show <id>')
    .description('show one backup')
    .option('--metadata', 'also decrypt and show the sealed metadata (asks for the passphrase)')
    .option(...passphraseFile)
    .option('--json', 'print the BackupDetail as JSON')
    .action(
      action(async ({ signal, config }, id: string, options: PassphraseOptions & { metadata?: boolean }) => {
        const client = clientFor(config);
        const detail = await client.getBackup(id, signal);
        if (options.json) return printJson(detail);
        print(recordLines(detail).join('\n'));
        if (!options.metadata || detail.encryptedMetadata === null) return;
        const { masterKey } = await unlock(client, config, options, signal);
        const dek = unwrapDek(masterKey, id, detail);
        try {
          print(metadataLines(openMetadata(dek, id, detail)).join('\n'));
        } finally {
          wipe(dek, masterKey);
        }
      }),
    );

  program
    .command('restore <id> <dir>')
    .description('download, verify and decrypt a backup into <dir> (created if missing; must be empty unless --force)')
    .option(...passphraseFile)
    .option('--force', 'restore into a non-empty directory, replacing what the backup holds')
    .option('--json', 'print the restored BackupDetail as JSON')
    .action(
      action(async ({ signal, config }, id: string, dir: string, options: PassphraseOptions & { force?: boolean }) => {
        await checkTarget(dir, !!options.force);
        const client = clientFor(config);
        const { masterKey } = await unlock(client, config, options, signal);
        const bar = progressBar('downloading + decrypting', !!options.json);
        try {
          const result = await runRestore({
            client,
            masterKey,
            backupId: id,
            target: dir,
            force: !!options.force,
            signal,
            onEvent: (event) => {
              if (event.type === 'progress') bar.update(event.received, event.total);
              else if (event.type === 'resumed' && !options.json) note(`connection lost; resuming at byte ${event.from}`);
            },
          });
          bar.stop();
          if (options.json) return printJson(result.detail);
          const m = result.metadata;
          print(
            `restored ${m.name} (${m.fileCount} files, ${bytes(m.plaintextSizeBytes)}) into ${result.target}; ` +
              `final tag and SHA-256 verified`,
          );
        } finally {
          bar.stop();
          wipe(masterKey);
        }
      }),
    );

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

  program
    .command('passphrase')
    .description('change the vault passphrase (re-wraps the master key; every backup stays readable)')
    .option(...passphraseFile)
    .option('--new-passphrase-file <file>', 'read the new passphrase from this file (else COFFER_NEW_PASSPHRASE, else a prompt)')
    .option(...kdfOption)
    .option('--json', 'print the API response as JSON')
    .action(
      action(async ({ signal, config }, options: PassphraseOptions & { newPassphraseFile?: string; kdf?: string }) => {
        const profile = kdfProfile(options.kdf, config);
        const client = clientFor(config);
        const { masterKey } = await unlock(client, config, options, signal);
        try {
          const next = await readNewPassphrase(config, { newPassphraseFile: options.newPassphraseFile, signal });
          const result = await changePassphrase(client, masterKey, next, profile, signal);
          if (options.json) return printJson(result);
          print('passphrase changed; every backup stays readable with the new passphrase (the old one no longer works)');
        } finally {
          wipe(masterKey);
        }
      }),
    );

  program
    .command('reset')
    .description('delete the vault key material (and, with --delete-backups, every backup): irreversible')
    .option('--delete-backups', 'also delete every remaining backup')
    .option('--yes', 'do not ask for confirmation on a terminal')
    .option('--json', 'print the API response as JSON')
    .action(
      action(async ({ signal, config }, options: JsonOption & { deleteBackups?: boolean; yes?: boolean }) => {
        const client = clientFor(config);
        if (options.deleteBackups && !options.yes) {
          const confirmed = await confirmOnTerminal(
            'This deletes every backup and the vault key material for good. Type "delete" to continue: ',
            'delete',
            signal,
          );
          if (!confirmed) throw new CliError('reset cancelled; nothing was deleted', EXIT.failure);
        }
        const result = await client.reset({ deleteBackups: !!options.deleteBackups }, signal);
        if (options.json) return printJson(result);
        print(
          `reset: vault material ${result.accountDeleted ? 'deleted' : 'was already absent'}, ` +
            `${result.deletedBackups} backup(s) deleted. Run \`coffer init\` to start again.`,
        );
      }),
    );
}
