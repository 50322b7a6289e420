/** `coffer recover`: a new passphrase from the recovery kit, without the old passphrase (docs/crypto.md §1c). */
import { plural } from '../../domain/words.js';
import type { Command } from 'commander';
import { recoverVault, wipe } from '../../client/index.js';
import { action, clientFor, KDF_OPTION, kdfProfile } from '../command-frame.js';
import { readKit, readNewPassphrase } from '../secrets.js';
import { print, printJson } from '../output.js';

export function registerRecover(program: Command): void {
  program
    .command('recover')
    .description('set a new passphrase with the recovery kit (`coffer kit`) when the old one is forgotten')
    .option('--kit-file <file>', 'read the kit from this file (`-` or none: stdin)')
    .option('--new-passphrase-file <file>', 'read the new passphrase from this file (else COFFER_NEW_PASSPHRASE, else a prompt)')
    .option('--force', 'use the kit even when it opens only some backups, or when there is no backup to check it against')
    .option(...KDF_OPTION)
    .option('--json', 'print the rotate response plus "opened", "checked" and "fingerprint"')
    .action(
      action(
        async (
          { signal, config },
          options: { kitFile?: string; newPassphraseFile?: string; force?: boolean; kdf?: string; json?: boolean },
        ) => {
          const profile = kdfProfile(options.kdf, config);
          const client = clientFor(config);
          const kit = await readKit(options.kitFile, config, 'recover');
          try {
            const next = await readNewPassphrase(config, { newPassphraseFile: options.newPassphraseFile, signal });
            const result = await recoverVault(client, kit.material, next, { profile, force: !!options.force, signal });
            if (options.json) {
              return printJson({
                ...result.rotate,
                opened: result.opened,
                checked: result.checked,
                fingerprint: result.recipient.fingerprint,
              });
            }
            print(`vault recovered: the kit (${plural(kit.keys, 'key')}) opened ${result.opened} of ${plural(result.checked, 'backup')}`);
            // The kit's current key is the vault's from now on: its recipient is not claimed unchanged (the kit may predate a
            // rekey this machine never saw).
            print(`the new passphrase now unlocks the vault; its recipient is the kit's current key (${result.recipient.fingerprint})`);
          } finally {
            wipe(kit.material);
          }
        },
      ),
    );
}
