/** `coffer passphrase`: re-wraps the master key under a new passphrase. */
import type { Command } from 'commander';
import { changePassphraseKeepingHistory, wipe } from '../../client/index.js';
import { action, clientFor, KDF_OPTION, kdfProfile, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { readNewPassphrase, unlock } from '../secrets.js';
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
          const { account, historyDays } = await changePassphraseKeepingHistory(client, masterKey, next, profile, signal, read);
          if (options.json) return printJson(account);
          print('passphrase changed; every backup stays readable with the new passphrase');
          if (historyDays !== null && historyDays > 0) {
            // The server's own word (header X-Coffer-Vault-History-Days): the account's deletion grace.
            note(
              `the server keeps the previous vault envelope for ${historyDays} day${historyDays === 1 ? '' : 's'}: the account owner can ` +
                'restore it from the console (Vault page) if this change was not wanted, and until then the old passphrase opens it',
            );
          }
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
