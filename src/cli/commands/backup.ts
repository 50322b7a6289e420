/** `coffer backup <path>`: tar → gzip → encrypt → upload, streamed. */
import type { Command } from 'commander';
import fsp from 'node:fs/promises';
import { runBackup, type BackupEvent } from '../../client/backup.js';
import { chainForProfile } from '../../client/chain.js';
import { wipe } from '../../client/envelope.js';
import { fsReason } from '../../client/fs-errors.js';
import { requireSealableVault } from '../../client/vault.js';
import {
  action,
  bytes,
  clientFor,
  localTime,
  PASSPHRASE_FILE_OPTION,
  type PassphraseOptions,
  progressBar,
  recipientFor,
  unlock,
} from '../client-io.js';
import { note, print, printJson, usageError } from '../output.js';

type BackupOptions = PassphraseOptions & { name?: string; hostappVersion?: string; recipient?: string };

export function registerBackup(program: Command): void {
  program
    .command('backup <path>')
    .description('encrypt a directory (or a file) locally and upload it: tar → gzip → encrypt → upload, streamed')
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--name <name>', 'name kept in the encrypted metadata (default: the base name of <path>)')
    .option('--hostapp-version <version>', 'version of the application whose data this is (stored in clear)')
    .option(
      '--recipient <recipient>',
      'seal the backup to this recipient (`coffer recipient` prints it; else COFFER_RECIPIENT): no passphrase needed, and this host cannot restore it',
    )
    .option('--json', 'print the READY backup (BackupDetail) as JSON (with recipientFingerprint when sealed to a recipient)')
    .action(
      action(async ({ signal, config, profile }, source: string, options: BackupOptions) => {
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
          // With a profile, the backup is the next link of its history chain (docs/crypto.md §3a).
          const chain = profile ? await chainForProfile(config.stateDir, profile.name) : undefined;
          const result = await runBackup({
            client,
            ...(recipient ? { recipient } : { masterKey }),
            source,
            name: options.name,
            hostappVersion: options.hostappVersion,
            maxArchiveBytes: config.maxArchiveBytes ?? undefined,
            chain: chain?.link,
            signal,
            onEvent,
          });
          await chain?.record(result);
          const { detail, metadata } = result;
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
}
