/** `coffer kit`: the recovery kit, the master keys as BIP-39 words (docs/crypto.md §1c). */
import type { Command } from 'commander';
import QRCode from 'qrcode';
import { wipe } from '../../client/envelope.js';
import { formatKit } from '../../client/kit.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions, unlock } from '../client-io.js';
import { CliError, note } from '../output.js';

/**
 * The kit's lines without its comments (what `coffer recover` reads) as a terminal QR code: qrcode's half-block
 * renderer, black on white whatever the terminal's colours, each row a kit comment line ("# …") so the whole output
 * stays a valid kit when redirected to a file. Error correction M (15 % of the code may be damaged).
 */
export async function kitQr(kit: string): Promise<string> {
  const content = `${kit.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#')).join('\n')}\n`;
  let code: string;
  try {
    code = await QRCode.toString(content, { type: 'terminal', small: true, errorCorrectionLevel: 'M' });
  } catch (error) {
    throw new CliError(`the kit is too long for one QR code (${(error as Error).message}); keep the printed words instead`);
  }
  // eslint-disable-next-line no-control-regex
  const rows = code.split('\n').filter((row) => row.replace(/\x1b\[[0-9;]*m/g, '') !== '');
  return [
    '# QR code of the lines above (not of these comments): scan it and save the text as a file for',
    '# `coffer recover --kit-file <file>` or `coffer restore --kit-file <file>`.',
    ...rows.map((row) => `# ${row}\x1b[0m`),
    '',
  ].join('\n');
}

export function registerKit(program: Command): void {
  program
    .command('kit')
    .description('print the recovery kit (the master keys as words): it sets a new passphrase when the old one is forgotten')
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--qr', 'also print the kit as a QR code for the terminal (black on white), as comment lines of the kit')
    .action(
      action(async ({ signal, config }, options: PassphraseOptions & { qr?: boolean }) => {
        const { masterKey } = await unlock(clientFor(config), config, options, signal);
        try {
          const kit = formatKit(masterKey, config.url);
          const qr = options.qr ? await kitQr(kit) : '';
          // The kit alone on stdout (`coffer kit > kit.txt`); its own comment lines carry the warning too.
          process.stdout.write(kit + qr);
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
