/** `coffer recover`: a new passphrase from the recovery kit, without the old passphrase (docs/crypto.md §1c). */
import fsp from 'node:fs/promises';
import type { Command } from 'commander';
import { wipe } from '../../client/envelope.js';
import { KitFormatError, parseKit } from '../../client/kit.js';
import { recoverVault } from '../../client/vault.js';
import { action, clientFor, KDF_OPTION, kdfProfile, readNewPassphrase } from '../client-io.js';
import { CliError, note, print, printJson, usageError } from '../output.js';

const MAX_KIT_BYTES = 64 * 1024;

async function readKit(file: string | undefined): Promise<string> {
  if (file !== undefined) {
    try {
      const stat = await fsp.stat(file);
      if (stat.size > MAX_KIT_BYTES) throw usageError(`--kit-file ${file} is too large to be a recovery kit`);
      return await fsp.readFile(file, 'utf8');
    } catch (error) {
      if (error instanceof CliError) throw error;
      throw usageError(`cannot read --kit-file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  }
  if (process.stdin.isTTY) throw usageError('no kit: pass --kit-file <file> or pipe the kit on stdin');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_KIT_BYTES) throw usageError('stdin is too large to be a recovery kit');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function registerRecover(program: Command): void {
  program
    .command('recover')
    .description('set a new passphrase with the recovery kit (`coffer kit`) when the old one is forgotten')
    .option('--kit-file <file>', 'read the kit from this file (else stdin)')
    .option('--new-passphrase-file <file>', 'read the new passphrase from this file (else COFFER_NEW_PASSPHRASE, else a prompt)')
    .option('--force', 'use the kit even when it opens only some backups, or when there is no backup to check it against')
    .option(...KDF_OPTION)
    .option('--json', 'print the rotate response plus "opened", "checked" and "fingerprint"')
    .action(
      action(async ({ signal, config }, options: { kitFile?: string; newPassphraseFile?: string; force?: boolean; kdf?: string; json?: boolean }) => {
        const profile = kdfProfile(options.kdf, config);
        const client = clientFor(config);
        let kit;
        try {
          kit = parseKit(await readKit(options.kitFile));
        } catch (error) {
          if (error instanceof KitFormatError) throw usageError(`invalid recovery kit: ${error.message}`);
          throw error;
        }
        try {
          if (kit.server !== null && kit.server !== config.url) {
            note(`note: the kit was printed for ${kit.server}; recovering on ${config.url}`);
          }
          const next = await readNewPassphrase(config, { newPassphraseFile: options.newPassphraseFile, signal });
          const result = await recoverVault(client, kit.material, next, { profile, force: !!options.force, signal });
          if (options.json) {
            return printJson({ ...result.rotate, opened: result.opened, checked: result.checked, fingerprint: result.recipient.fingerprint });
          }
          print(`vault recovered: the kit (${kit.keys} key${kit.keys === 1 ? '' : 's'}) opened ${result.opened} of ${result.checked} backups`);
          print('the new passphrase now unlocks the vault; the recipient is unchanged ' + `(${result.recipient.fingerprint})`);
        } finally {
          wipe(kit.material);
        }
      }),
    );
}
