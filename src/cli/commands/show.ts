/** `coffer show <id>`: one backup, and with --metadata its decrypted sealed metadata. */
import type { Command } from 'commander';
import { type BackupDetailBody, type BackupMetadata, type BackupRecordBody, openMetadata, unwrapDek, wipe } from '../../client/index.js';
import { plural } from '../../domain/words.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { unlock } from '../secrets.js';
import { bytes, localTime } from '../format.js';
import { print, printJson } from '../output.js';

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
    `contents:    ${plural(metadata.fileCount, 'file')}, ${plural(metadata.directoryCount, 'directory', 'directories')}, ${plural(metadata.symlinkCount, 'symlink')}`,
    `sha-256:     ${metadata.plaintextSha256}`,
    `made at:     ${localTime(metadata.createdAt)}`,
  ];
}

export function registerShow(program: Command): void {
  program
    .command('show <id>')
    .description('show one backup')
    .option('--metadata', 'also decrypt and show the sealed metadata (asks for the passphrase)')
    .option(...PASSPHRASE_FILE_OPTION)
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
}
