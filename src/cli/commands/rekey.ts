/** `coffer rekey`: a new master key for everything from now on; older keys stay in the keyring (docs/crypto.md §1b). */
import { plural } from '../../domain/words.js';
import type { Command } from 'commander';
import { rekeyVault } from '../../client/index.js';
import { action, KDF_OPTION, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { requireNewestKeys, wrappingFrame } from '../secrets.js';
import { note, print, printJson } from '../output.js';

export function registerRekey(program: Command): void {
  program
    .command('rekey')
    .description('make a new master key for every backup from now on (older backups stay readable; same passphrase, new salt)')
    .option(...PASSPHRASE_FILE_OPTION)
    .option(...KDF_OPTION)
    .option('--json', 'print the rotate response plus "recipient", "fingerprint", "previousFingerprint" and "keys"')
    .action(
      action(async ({ signal, config }, options: PassphraseOptions & { kdf?: string }) => {
        const { profile, client, passphrase } = await wrappingFrame(config, options, signal);
        // The vault must hold the newest key seen here (else a rekey would drop it for good); the new key is the newest after.
        const result = await rekeyVault(
          client,
          passphrase,
          profile,
          signal,
          async (material) => void (await requireNewestKeys(config, material, 'the vault the server sent')),
        );
        const { recipient, previousRecipient, keys } = result;
        if (options.json) {
          return printJson({
            ...result.rotate,
            recipient: recipient.text,
            fingerprint: recipient.fingerprint,
            previousFingerprint: previousRecipient.fingerprint,
            keys,
          });
        }
        print(`new master key; the keyring now holds ${plural(keys, 'key')} (the older ones only read older backups)`);
        print(`new recipient fingerprint ${recipient.fingerprint} (was ${previousRecipient.fingerprint})`);
        note(
          'backups made from now on with the passphrase use the new key: an old copy of the vault envelope opened with the ' +
            'old passphrase cannot read them. Give backup hosts the new recipient (`coffer recipient`); hosts still sealing ' +
            `to ${previousRecipient.fingerprint} keep working, since the old keys stay in the keyring, but their backups ` +
            'are readable with the old key.',
        );
      }),
    );
}
