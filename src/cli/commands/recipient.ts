/** `coffer recipient`: the vault's public recipient, for backup hosts that must never read a backup. */
import type { Command } from 'commander';
import { deriveRecipient, wipe } from '../../client/index.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { unlock } from '../secrets.js';
import { note, print, printJson } from '../output.js';

export function registerRecipient(program: Command): void {
  program
    .command('recipient')
    .description(
      "print the vault's recipient (and its fingerprint): a backup host given it can back up without the passphrase, never restore",
    )
    .option(...PASSPHRASE_FILE_OPTION)
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
}
