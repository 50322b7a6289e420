/** `coffer kit`: the recovery kit, the master keys as BIP-39 words (docs/crypto.md §1c). */
import type { Command } from 'commander';
import { wipe } from '../../client/envelope.js';
import { formatKit } from '../../client/kit.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions, unlock } from '../client-io.js';
import { note } from '../output.js';

export function registerKit(program: Command): void {
  program
    .command('kit')
    .description('print the recovery kit (the master keys as words): it sets a new passphrase when the old one is forgotten')
    .option(...PASSPHRASE_FILE_OPTION)
    .action(
      action(async ({ signal, config }, options: PassphraseOptions) => {
        const { masterKey } = await unlock(clientFor(config), config, options, signal);
        try {
          // The kit alone on stdout (`coffer kit > kit.txt`); its own comment lines carry the warning too.
          process.stdout.write(formatKit(masterKey, config.url));
          note(
            'WARNING: whoever holds this kit can read every backup of this vault without the passphrase. Keep it offline ' +
              '(paper, a safe), never next to the API key; print a new one after every `coffer rekey`.',
          );
        } finally {
          wipe(masterKey);
        }
      }),
    );
}
