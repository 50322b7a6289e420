/** `coffer init`: creates the vault, a master key wrapped under the passphrase. */
import type { Command } from 'commander';
import { initVault, KDF_PROFILES } from '../../client/index.js';
import { action, KDF_OPTION, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { wrappingFrame } from '../secrets.js';
import { bytes } from '../format.js';
import { print, printJson } from '../output.js';

export function registerInit(program: Command): void {
  program
    .command('init')
    .description('create the vault: a master key wrapped under your passphrase (the passphrase never leaves this machine)')
    .option(...PASSPHRASE_FILE_OPTION)
    .option(...KDF_OPTION)
    .option('--json', 'print the API response as JSON')
    .action(
      action(async ({ signal, config }, options: PassphraseOptions & { kdf?: string }) => {
        const { profile, client, passphrase } = await wrappingFrame(config, options, signal, true);
        const result = await initVault(client, passphrase, profile, signal);
        if (options.json) return printJson(result);
        const { opslimit, memlimit } = KDF_PROFILES[profile];
        print(`vault initialized (Argon2id ${profile}: opslimit ${opslimit}, memlimit ${bytes(memlimit)}).`);
        print(
          'Keep the passphrase safe: without it no backup can be restored, and nobody can recover it. ' +
            'Make a recovery kit now: `coffer kit --output kit.txt` writes the keys as words (a new 0600 file) that set a ' +
            'new passphrase with `coffer recover --kit-file kit.txt`; keep it offline, whoever holds it reads every backup.',
        );
      }),
    );
}
