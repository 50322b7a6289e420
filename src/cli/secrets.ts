/**
 * The secrets of the client commands and the prompts that ask for them: the passphrase (--passphrase-file, the
 * environment, or a no-echo prompt on a terminal, never argv), the recovery kit, the check that key material is the
 * newest this machine saw, and the typed confirmation of a destructive command.
 */
import fsp from 'node:fs/promises';
import {
  type BackupAccountBody,
  type CofferClient,
  fsReason,
  type KdfProfile,
  type Kit,
  KitFormatError,
  parseKit,
  type Recipient,
  unlockVault,
  unwrapMasterKey,
  wipe,
} from '../client/index.js';
import { checkKeyPin, ringFingerprints } from './key-pin.js';
import type { ClientConfig } from '../config.js';
import { clientFor, kdfProfile, type PassphraseOptions } from './command-frame.js';
import { readHiddenLine } from './hidden-input.js';
import { CliError, EXIT, note, usageError } from './output.js';

/**
 * The frame of the commands that wrap key material under the passphrase (`init`, `rekey`): the Argon2id profile of the
 * new wrapping (checked first, before any prompt), the client, and the passphrase (asked twice when `confirm`).
 */
export async function wrappingFrame(
  config: ClientConfig,
  options: PassphraseOptions & { kdf?: string },
  signal: AbortSignal,
  confirm = false,
): Promise<{ profile: KdfProfile; client: CofferClient; passphrase: string }> {
  const profile = kdfProfile(options.kdf, config);
  const client = clientFor(config);
  const passphrase = await readPassphrase(config, { passphraseFile: options.passphraseFile, confirm, signal });
  return { profile, client, passphrase };
}

/**
 * Refuses a key ring without the newest key this machine saw for its vault on this server (an envelope from before a
 * rekey, put back), and remembers the ring's current key (src/cli/key-pin.ts). Wipes `material` when it refuses.
 */
export async function requireNewestKeys(
  config: ClientConfig,
  material: Buffer,
  what: string,
  older: { means?: string; onOlder?: 'refuse' | 'report' } = {},
): Promise<Awaited<ReturnType<typeof checkKeyPin>>['older']> {
  let checked: Awaited<ReturnType<typeof checkKeyPin>>;
  try {
    checked = await checkKeyPin(config.stateDir, config.url, material, {
      acceptOlder: config.acceptOlderKeys,
      what,
      olderMeans: older.means,
      onOlder: older.onOlder,
    });
  } catch (error) {
    wipe(material);
    throw error;
  }
  if (checked.unrecorded)
    note(
      `warning: the newest vault key is not remembered here (${checked.unrecorded}): a rollback of the vault to before a rekey cannot be noticed`,
    );
  return checked.older;
}

/** Asks for the passphrase (file, environment or prompt) and unlocks the vault's master key. */
export async function unlock(client: CofferClient, config: ClientConfig, options: PassphraseOptions, signal: AbortSignal) {
  const passphrase = await readPassphrase(config, { passphraseFile: options.passphraseFile, signal });
  const unlocked = await unlockVault(client, passphrase, signal);
  await requireNewestKeys(config, unlocked.masterKey, 'the vault the server sent');
  return unlocked;
}

/**
 * Asks for the passphrase, then starts unlocking the vault and returns at once: the key derivation (Argon2id, in
 * libsodium's thread) runs while the caller goes on. The key is a secure buffer: wipe it when done.
 */
export async function startUnlock(client: CofferClient, config: ClientConfig, options: PassphraseOptions, signal: AbortSignal) {
  const passphrase = await readPassphrase(config, { passphraseFile: options.passphraseFile, signal });
  const masterKey = unlockVault(client, passphrase, signal).then(async ({ masterKey }) => {
    await requireNewestKeys(config, masterKey, 'the vault the server sent');
    return masterKey;
  });
  // Awaited later, after other requests: a refusal that comes first must not end the process as an unhandled
  // rejection (a stack trace instead of the error). Whoever awaits it still gets the refusal.
  masterKey.catch(() => undefined);
  return { masterKey };
}

/**
 * Before a backup sealed to `recipient`, when this command can open the vault (its key read `account`, and the
 * passphrase is at hand: the caller checks passphraseGiven, so nothing is asked): the recipient must be one of the
 * vault's keys. A recipient of another account's vault (a profile's, a variable's) would make a backup this
 * account can never read; it is refused before anything is uploaded. A wrong passphrase fails as it always does.
 */
export async function requireVaultRecipient(
  account: BackupAccountBody,
  config: ClientConfig,
  options: PassphraseOptions,
  recipient: Recipient,
  from: string,
): Promise<void> {
  const material = await unwrapMasterKey(account, await readPassphrase(config, { passphraseFile: options.passphraseFile }));
  await requireNewestKeys(config, material, 'the vault the server sent');
  let fingerprints: string[];
  try {
    fingerprints = ringFingerprints(material);
  } finally {
    wipe(material);
  }
  if (!fingerprints.includes(recipient.fingerprint)) {
    throw usageError(
      `the recipient ${recipient.fingerprint} (from ${from}) is not a key of this account's vault (its recipient is ${fingerprints[0]}): ` +
        "a backup sealed to it could never be read with this account's passphrase or kit. Nothing was uploaded. " +
        '`coffer recipient` prints the right one',
    );
  }
  if (fingerprints[0] !== recipient.fingerprint) {
    note(
      `note: the recipient ${recipient.fingerprint} is an older key of this vault (before a rekey); its current recipient is ${fingerprints[0]}`,
    );
  }
}

// ---- passphrases: --passphrase-file, the environment, or a no-echo prompt on a terminal ----

async function fromFile(file: string, option: string): Promise<string> {
  let text: string;
  try {
    text = await fsp.readFile(file, 'utf8');
  } catch (error) {
    throw usageError(`cannot read ${option} ${file}: ${fsReason(error)}`);
  }
  return text.replace(/\r?\n$/, '');
}

/** Reads a line from the terminal without echoing it (a line editor: src/cli/hidden-input.ts). */
export function promptHidden(question: string, signal?: AbortSignal): Promise<string> {
  return readHiddenLine(question, () => new CliError('cancelled', EXIT.interrupted), signal);
}

const canPrompt = () => !!process.stdin.isTTY && typeof process.stdin.setRawMode === 'function';

function nonEmpty(value: string, source: string): string {
  if (value.length === 0) throw usageError(`the passphrase from ${source} is empty`);
  return value;
}

/** A passphrase variable set to nothing means "none here": never a prompt (a script that set it must not hang on one). */
const setToNothing = (variable: string, option: string) =>
  usageError(
    `${variable} is set to nothing and this command needs the passphrase: set it, pass ${option} <file>, or unset it to be asked on a terminal`,
  );

/** Whether the passphrase is at hand without asking (--passphrase-file or COFFER_PASSPHRASE). */
export const passphraseGiven = (config: ClientConfig, options: PassphraseOptions): boolean =>
  options.passphraseFile !== undefined || config.passphrase !== null;

/** The vault passphrase: --passphrase-file, else COFFER_PASSPHRASE, else a prompt (asked twice when `confirm`). */
export async function readPassphrase(
  config: ClientConfig,
  options: { passphraseFile?: string; confirm?: boolean; signal?: AbortSignal },
): Promise<string> {
  if (options.passphraseFile) return nonEmpty(await fromFile(options.passphraseFile, '--passphrase-file'), '--passphrase-file');
  if (config.passphrase !== null) return config.passphrase;
  if (config.emptySettings.includes('COFFER_PASSPHRASE')) throw setToNothing('COFFER_PASSPHRASE', '--passphrase-file');
  if (!canPrompt()) {
    throw usageError('no passphrase: set COFFER_PASSPHRASE, pass --passphrase-file <file>, or run on a terminal');
  }
  return promptTwice('Passphrase: ', options.confirm ? 'Repeat the passphrase: ' : undefined, options.signal);
}

/** The new passphrase of `coffer passphrase`: --new-passphrase-file, COFFER_NEW_PASSPHRASE, or a prompt asked twice. */
export async function readNewPassphrase(
  config: ClientConfig,
  options: { newPassphraseFile?: string; signal?: AbortSignal },
): Promise<string> {
  if (options.newPassphraseFile) {
    return nonEmpty(await fromFile(options.newPassphraseFile, '--new-passphrase-file'), '--new-passphrase-file');
  }
  if (config.newPassphrase !== null) return config.newPassphrase;
  if (config.emptySettings.includes('COFFER_NEW_PASSPHRASE')) throw setToNothing('COFFER_NEW_PASSPHRASE', '--new-passphrase-file');
  if (!canPrompt()) {
    throw usageError('no new passphrase: set COFFER_NEW_PASSPHRASE, pass --new-passphrase-file <file>, or run on a terminal');
  }
  return promptTwice('New passphrase: ', 'Repeat the new passphrase: ', options.signal);
}

async function promptTwice(first: string, second: string | undefined, signal: AbortSignal | undefined): Promise<string> {
  const value = nonEmpty(await promptHidden(first, signal), 'the prompt');
  if (second !== undefined && (await promptHidden(second, signal)) !== value) throw usageError('the passphrases do not match');
  return value;
}

export async function confirmOnTerminal(question: string, expected: string, signal?: AbortSignal): Promise<boolean> {
  if (!canPrompt()) return true;
  signal?.throwIfAborted();
  process.stderr.write(question);
  const input = process.stdin;
  input.setEncoding('utf8');
  input.resume();
  let onData: (chunk: string) => void = () => undefined;
  let onAbort = () => undefined as void;
  try {
    const answer = await new Promise<string>((resolve, reject) => {
      onData = resolve;
      onAbort = () => reject(signal?.reason as Error);
      input.once('data', onData);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    return answer.trim() === expected;
  } finally {
    input.off('data', onData);
    signal?.removeEventListener('abort', onAbort);
    input.pause();
  }
}

// ---- the recovery kit ----

const MAX_KIT_BYTES = 64 * 1024;

async function kitText(file: string | undefined): Promise<string> {
  if (file !== undefined && file !== '-') {
    try {
      const stat = await fsp.stat(file);
      if (stat.size > MAX_KIT_BYTES) throw usageError(`--kit-file ${file} is too large to be a recovery kit`);
      return await fsp.readFile(file, 'utf8');
    } catch (error) {
      if (error instanceof CliError) throw error;
      throw usageError(`cannot read --kit-file ${file}: ${fsReason(error)}`);
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

const OLDER_KIT =
  'a kit printed before a rekey. Setting a new passphrase with it would lose the keys of the backups made since: ' +
  'print a new kit after every rekey (`coffer kit`, with the passphrase). This one still restores the backups made before ' +
  'the rekey (`coffer restore <id> --kit-file …`).';

/**
 * The recovery kit (docs/crypto.md §1c) from `--kit-file <file>` (`-` or none: stdin), read and checked: a kit that
 * cannot be used is a usage error naming the line. Notes when it was printed for another server. The material is a
 * secure buffer: wipe it when done. `use`: 'recover' (its keys become the vault's) refuses a kit from before a rekey;
 * 'read' (restore) takes it with a note, since it changes nothing and still reads the backups made before.
 */
export async function readKit(file: string | undefined, config: ClientConfig, use: 'recover' | 'read'): Promise<Kit> {
  let kit: Kit;
  try {
    kit = parseKit(await kitText(file));
  } catch (error) {
    if (error instanceof KitFormatError) throw usageError(`invalid recovery kit: ${error.message}`);
    throw error;
  }
  if (kit.server !== null && kit.server !== config.url) note(`note: the kit was printed for ${kit.server}; using it on ${config.url}`);
  const older = await requireNewestKeys(config, kit.material, 'the kit', use === 'recover' ? { means: OLDER_KIT } : { onOlder: 'report' });
  if (older) {
    // Named by the kit's own key: the record is per vault, and the kit need not be this account's (a key of one
    // account with the kit of another reads nothing of it), so "the vault" alone would name a stranger's key.
    const [kitKey] = ringFingerprints(kit.material);
    note(
      `note: this kit (recipient ${kitKey}) is from before a rekey of its vault: that vault's newest key ${older.newest}, seen here ` +
        `since ${older.seenAt}, is not in it. It reads that vault's backups made before the rekey, not the newer ones; ` +
        'print a new kit with `coffer kit`.',
    );
  }
  return kit;
}
