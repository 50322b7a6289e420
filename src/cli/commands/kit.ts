/** `coffer kit`: the recovery kit, the master keys as BIP-39 words (docs/crypto.md §1c). */
import type { Command } from 'commander';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import QRCode from 'qrcode';
import { formatKit, fsReason, wipe } from '../../client/index.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { unlock } from '../secrets.js';
import { CliError, note, usageError } from '../output.js';

/**
 * The kit's lines without its comments (what `coffer recover` reads) as a QR code, each row a kit comment line
 * ("# …") so the whole output stays a valid kit when redirected to a file. On a terminal: qrcode's half-block
 * renderer with colour codes, black on white whatever the terminal's colours. Anywhere else (a file, a pipe,
 * `--output`): the same half blocks as plain text, no escape code, dark modules as ink (as printed on paper).
 * Error correction M (15 % of the code may be damaged).
 */
export async function kitQr(kit: string, terminal: boolean): Promise<string> {
  const content = `${kit
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .join('\n')}\n`;
  let code: string;
  try {
    code = terminal
      ? await QRCode.toString(content, { type: 'terminal', small: true, errorCorrectionLevel: 'M' })
      : await QRCode.toString(content, { type: 'utf8', errorCorrectionLevel: 'M' });
  } catch (error) {
    throw new CliError(`the kit is too long for one QR code (${(error as Error).message}); keep the printed words instead`);
  }
  // eslint-disable-next-line no-control-regex
  const rows = code.split('\n').filter((row) => row.replace(/\x1b\[[0-9;]*m/g, '').trim() !== '');
  return [
    '# QR code of the lines above (not of these comments): scan it and save the text as a file for',
    '# `coffer recover --kit-file <file>` or `coffer restore --kit-file <file>`.',
    ...rows.map((row) => (terminal ? `# ${row}\x1b[0m` : `# ${row}`)),
    '',
  ].join('\n');
}

/**
 * Writes the kit to a new file, created with mode 0600 (O_EXCL: an existing file, or a symlink in its place, is
 * never overwritten). A usage error when it cannot be created; nothing else is written then.
 */
async function writeKitFile(file: string, text: string): Promise<void> {
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(file, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
      throw usageError(`--output ${file} already exists: the kit is never written over a file; remove it or name another one`);
    }
    throw usageError(`cannot create --output ${file}: ${fsReason(error)}`);
  }
  try {
    await handle.chmod(0o600); // whatever the umask
    await handle.writeFile(text);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await fsp.rm(file, { force: true });
    throw new CliError(`cannot write --output ${file}: ${fsReason(error)}`);
  }
  await handle.close();
}

/** The mode of stdout when it is a regular file that others than its owner may read (`coffer kit > kit.txt`), else null. */
function stdoutSharedFileMode(): number | null {
  try {
    const stat = fs.fstatSync(1);
    return stat.isFile() && (stat.mode & 0o077) !== 0 ? stat.mode & 0o777 : null;
  } catch {
    return null;
  }
}

export function registerKit(program: Command): void {
  program
    .command('kit')
    .description('print the recovery kit (the master keys as words): it sets a new passphrase when the old one is forgotten')
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--qr', 'also print the kit as a QR code for the terminal (black on white), as comment lines of the kit')
    .option('--output <file>', 'write the kit to this new file (mode 0600; an existing file is never overwritten) instead of stdout')
    .action(
      action(async ({ signal, config }, options: PassphraseOptions & { qr?: boolean; output?: string }) => {
        if (options.output !== undefined && fs.existsSync(options.output)) {
          // Said before the passphrase is asked for; writeKitFile checks again (O_EXCL) when it creates the file.
          throw usageError(
            `--output ${options.output} already exists: the kit is never written over a file; remove it or name another one`,
          );
        }
        const { masterKey } = await unlock(clientFor(config), config, options, signal);
        try {
          const kit = formatKit(masterKey, config.url);
          const qr = options.qr ? await kitQr(kit, options.output === undefined && process.stdout.isTTY === true) : '';
          if (options.output !== undefined) {
            await writeKitFile(options.output, kit + qr);
            note(`wrote the recovery kit to ${options.output} (mode 0600)`);
          } else {
            const shared = stdoutSharedFileMode();
            if (shared !== null) {
              note(
                `WARNING: the kit is going to a file that other users can read (mode ${shared.toString(8).padStart(4, '0')}): ` +
                  'chmod 600 it now, or use `coffer kit --output <file>`, which creates it 0600',
              );
            }
            // The kit alone on stdout; its own comment lines carry the warning too.
            process.stdout.write(kit + qr);
          }
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
