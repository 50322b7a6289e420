/** `coffer passphrase`: re-wraps the master key under a new passphrase. */
import type { Command } from 'commander';
import { wipe } from '../../client/envelope.js';
import { changePassphrase } from '../../client/vault.js';
import { action, clientFor, KDF_OPTION, kdfProfile, PASSPHRASE_FILE_OPTION, type PassphraseOptions, readNewPassphrase, unlock } from '../client-io.js';
import { print, printJson } from '../output.js';

export function registerPassphrase(program: Command): void {
  program
    .command('passphrase')
    .description('change the vault passphrase (re-wraps the master key; every backup stays readable)')
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--new-passphrase-file <file>', 'read the new passphrase from this file (else COFFER_NEW_PASSPHRASE, else a prompt)')
    .option(...KDF_OPTION)
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
}
