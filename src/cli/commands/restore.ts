/** `coffer restore <id> <dir> [--include <pattern>…]`: download, verify and decrypt a backup (or part of it). */
import type { Command } from 'commander';
import { checkTarget, runRestore, wipe } from '../../client/index.js';
import { plural } from '../../domain/words.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { readKit, startUnlock } from '../secrets.js';
import { progressBar } from '../progress.js';
import { bytes } from '../format.js';
import { note, print, printJson, usageError } from '../output.js';

export function registerRestore(program: Command): void {
  program
    .command('restore <id> <dir>')
    .description('download, verify and decrypt a backup into <dir> (created if missing; must be empty unless --force)')
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--kit-file <file>', 'restore with the recovery kit (`coffer kit`) instead of the passphrase (`-`: stdin)')
    .option('--force', 'restore into a non-empty directory, replacing what the backup holds')
    .option(
      '--include <pattern>',
      'restore only the entries this gitignore-style pattern matches, and what lies below a matched directory (repeatable)',
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .option('--json', 'print the restored BackupDetail as JSON')
    .action(
      action(
        async (
          { signal, config },
          id: string,
          dir: string,
          options: PassphraseOptions & { force?: boolean; kitFile?: string; include: string[] },
        ) => {
          if (options.kitFile !== undefined && options.passphraseFile !== undefined) {
            throw usageError('--kit-file and --passphrase-file exclude each other: the kit replaces the passphrase');
          }
          if (
            options.kitFile === undefined &&
            options.passphraseFile === undefined &&
            config.recipient !== null &&
            config.passphrase === null
          ) {
            // A backup host (a recipient, no passphrase): the passphrase must never be brought here to restore.
            throw usageError(
              'this is a backup host: it seals backups to a recipient and holds no passphrase, and it should never hold one. ' +
                "Restore on the owner's machine (coffer restore there), in the web console (Backups → download and decrypt in the page), " +
                'or with the recovery kit (coffer restore … --kit-file <kit>); nothing was restored',
            );
          }
          await checkTarget(dir, !!options.force);
          const client = clientFor(config);
          // With the kit, its keys open the backup directly: no passphrase is read, the vault on the server is not used.
          // With the passphrase, the download starts while the key is derived (runRestore).
          const { masterKey } =
            options.kitFile !== undefined
              ? { masterKey: Promise.resolve((await readKit(options.kitFile, config, 'read')).material) }
              : await startUnlock(client, config, options, signal);
          const bar = progressBar('downloading + decrypting', !!options.json);
          try {
            const result = await runRestore({
              client,
              masterKey,
              backupId: id,
              target: dir,
              force: !!options.force,
              include: options.include,
              signal,
              onEvent: (event) => {
                if (event.type === 'progress') bar.update(event.received, event.total);
                else if (event.type === 'resumed' && !options.json) note(`connection lost; resuming at byte ${event.from}`);
              },
            });
            bar.stop();
            for (const entry of result.skipped) note(`not restored ${entry.path}: ${entry.reason}`);
            if (options.json) return printJson(result.detail);
            const m = result.metadata;
            const what =
              options.include.length > 0
                ? `${plural(result.entries, 'selected entry', 'selected entries')} of ${m.name}`
                : `${m.name} (${plural(m.fileCount, 'file')}, ${bytes(m.plaintextSizeBytes)})`;
            print(`restored ${what} into ${result.target}; final tag and SHA-256 verified`);
          } finally {
            bar.stop();
            await masterKey.then(wipe, () => undefined);
          }
        },
      ),
    );
}
