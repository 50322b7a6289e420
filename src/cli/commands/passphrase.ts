/** `coffer passphrase`: re-wraps the master key under a new passphrase. */
import type { Command } from 'commander';
import { wipe } from '../../client/envelope.js';
import { changePassphrase } from '../../client/vault.js';
import { action, clientFor, KDF_OPTION, kdfProfile, PASSPHRASE_FILE_OPTION, type PassphraseOptions, readNewPassphrase, unlock } from '../client-io.js';
import { note, print, printJson } from '../output.js';

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
        const { masterKey, ...read } = await unlock(client, config, options, signal);
        try {
          const next = await readNewPassphrase(config, { newPassphraseFile: options.newPassphraseFile, signal });
          const result = await changePassphrase(client, masterKey, next, profile, signal, read);
          if (options.json) return printJson(result);
          print('passphrase changed; every backup stays readable with the new passphrase');
          // The same master key is re-wrapped: a copy of the old vault envelope still opens with the old passphrase.
          note(
            'the old passphrase no longer unlocks the vault on the server, but anyone who kept a copy of the old vault envelope ' +
              '(a server backup, a leak) and knows the old passphrase can still read every backup; to cut them off, run `coffer rekey`',
          );
        } finally {
          wipe(masterKey);
        }
      }),
    );
}
