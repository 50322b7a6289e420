/**
 * Terminal plumbing of the client commands (src/cli/commands/): the action wrapper every command runs in, the SDK
 * client from the ClientConfig, passphrases (never from argv), the progress bar, human formatting, and the mapping
 * of failures to exit codes (docs/client.md#exit-codes).
 */
import fsp from 'node:fs/promises';
import cliProgress from 'cli-progress';
import {
  IntegrityError,
  isKdfProfile,
  KDF_PROFILES,
  type KdfProfile,
  NewerFormatError,
  parseRecipient,
  type Recipient,
  RecipientFormatError,
  wipe,
} from '../client/envelope.js';
import { KDF_PROFILE_NAMES } from '../client/envelope-format.js';
import { fsReason } from '../client/fs-errors.js';
import { type Kit, KitFormatError, parseKit } from '../client/kit.js';
import { CLIENT_VERSION } from '../client/backup.js';
import { CofferApiError, CofferClient } from '../client/sdk.js';
import { unlockVault } from '../client/vault.js';
import { StatusStreamError } from '../client/watch.js';
import { ConfigPermissionError, type Profile, ProfileError, resolveApiKey, selectProfile } from '../client/profiles.js';
import { type ClientConfig, ConfigError, givenOverProfile, loadClientConfig, type ProfileSettings } from '../config.js';
import { readHiddenLine } from './hidden-input.js';
import { CliError, EXIT, note, usageError, writeHuman } from './output.js';
import { checkKeyPin } from '../client/key-pin.js';
import { formatBytes } from '../domain/words.js';

// ---- the frame of every client command ----

export interface JsonOption {
  json?: boolean;
  /** --profile: every client command takes it (registerCommands adds it). */
  profile?: string;
}
export interface PassphraseOptions extends JsonOption {
  passphraseFile?: string;
}

/** Options several commands share, as commander's `.option(...)` arguments. */
export const PASSPHRASE_FILE_OPTION = [
  '--passphrase-file <file>',
  'read the passphrase from this file (else COFFER_PASSPHRASE, else a prompt)',
] as const;
export const KDF_OPTION = [
  '--kdf <profile>',
  `Argon2id cost for the new wrapping: ${Object.keys(KDF_PROFILES).join(' | ')} (default COFFER_KDF or moderate)`,
] as const;


/** A profile of the config file, as selected for this command. */
export interface SelectedProfile {
  name: string;
  profile: Profile;
}

/** The selected profile of a command that needs one (run, agent, schedule). */
export function requireProfile(profile: SelectedProfile | null, command: string): SelectedProfile {
  if (!profile) {
    throw usageError(
      `${command} needs a profile: pass --profile <name>, set COFFER_PROFILE, or set "default" in the config file (coffer profile add)`,
    );
  }
  return profile;
}

/** What every command body gets: the CLI's abort signal, the client's settings and the selected profile (if any). */
export interface Run {
  signal: AbortSignal;
  config: ClientConfig;
  profile: SelectedProfile | null;
}

/**
 * The settings of a client command, read in this one place: the environment (src/config.ts CLIENT_SETTINGS) over
 * the selected profile (--profile, else COFFER_PROFILE, else the file's default), over the defaults. The profile's
 * API key is fetched from its file or command only when COFFER_API_KEY does not already give one.
 */
export async function loadSettings(
  requested: string | undefined,
  signal: AbortSignal,
  env?: Record<string, string | undefined>,
): Promise<{ config: ClientConfig; profile: SelectedProfile | null }> {
  const base = loadClientConfig(env);
  const selected = await selectProfile(base.configDir, requested ?? base.profileName);
  if (!selected) return { config: base, profile: null };
  const { profile } = selected;
  const supplied: ProfileSettings = {
    COFFER_URL: profile.url,
    ...(profile.blobApiUrl ? { COFFER_BLOB_API_URL: profile.blobApiUrl } : {}),
    ...(profile.recipient ? { COFFER_RECIPIENT: profile.recipient } : {}),
  };
  const given = givenOverProfile(env);
  for (const name of ['COFFER_URL', 'COFFER_RECIPIENT'] as const) {
    if (supplied[name] !== undefined && given[name] !== undefined && given[name] !== supplied[name]) {
      note(`note: ${name} is set and wins over profile ${selected.name}'s value`);
    }
  }
  if (given.COFFER_API_KEY !== undefined) note(`note: COFFER_API_KEY is set and wins over profile ${selected.name}'s key`);
  else supplied.COFFER_API_KEY = await resolveApiKey(base.configDir, profile.apiKey, signal);
  return { config: loadClientConfig(env, supplied), profile: selected };
}

/**
 * Runs a command body with the CLI's abort signal (Ctrl-C, SIGTERM) and the settings (loadSettings), mapping
 * every failure to the right exit code and message. After an interruption, whatever broke first, the command
 * ends as "interrupted" (exit 130) once its cleanup is done.
 */
export function action<A extends unknown[]>(body: (run: Run, ...args: A) => Promise<void>) {
  return async (...args: A): Promise<void> => {
    const options = args.find((a): a is JsonOption => typeof a === 'object' && a !== null && !Array.isArray(a)) ?? {};
    const { signal, dispose } = interruptible();
    try {
      const settings = await loadSettings(options.profile, signal);
      await body({ signal, ...settings }, ...args);
    } catch (error) {
      throw toCliError(signal.aborted ? signal.reason : error, !!options.json);
    } finally {
      dispose();
    }
  };
}

/**
 * Like `action`, for the commands that manage the config file itself (`coffer profile …`): the settings from the
 * environment only, no profile selected (so a profile that cannot be used can still be shown, replaced or removed).
 */
export function plainAction<A extends unknown[]>(body: (run: Run, ...args: A) => Promise<void>) {
  return async (...args: A): Promise<void> => {
    const options = args.find((a): a is JsonOption => typeof a === 'object' && a !== null && !Array.isArray(a)) ?? {};
    const { signal, dispose } = interruptible();
    try {
      await body({ signal, config: loadClientConfig(), profile: null }, ...args);
    } catch (error) {
      throw toCliError(signal.aborted ? signal.reason : error, !!options.json);
    } finally {
      dispose();
    }
  };
}

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
 * rekey, put back), and remembers the ring's current key (src/client/key-pin.ts). Wipes `material` when it refuses.
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
  if (checked.unrecorded) note(`warning: the newest vault key is not remembered here (${checked.unrecorded}): a rollback of the vault to before a rekey cannot be noticed`);
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

// ---- configuration ----

/** The SDK client for the configured server: every command that talks to it needs COFFER_API_KEY. */
export function clientFor(config: ClientConfig): CofferClient {
  if (config.apiKey === null) throw usageError('COFFER_API_KEY is not set: export the API key the operator gave you');
  const blobApiUrl = config.blobApiUrl ?? undefined;
  return new CofferClient({ baseUrl: config.url, apiKey: config.apiKey, blobApiUrl, userAgent: CLIENT_VERSION });
}

/** The Argon2id profile of a new wrapping: --kdf, else COFFER_KDF, else the default. */
export function kdfProfile(option: string | undefined, config: ClientConfig): KdfProfile {
  if (option === undefined) return config.kdf;
  if (!isKdfProfile(option)) {
    throw usageError(`unknown key-derivation profile "${option}" (expected ${KDF_PROFILE_NAMES.join(', ')})`);
  }
  return option;
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

/** The recipient `coffer backup` seals to: --recipient, else COFFER_RECIPIENT; null for none (the passphrase then). */
export function recipientFor(option: string | undefined, config: ClientConfig): Recipient | null {
  const [text, source] = option !== undefined ? [option, '--recipient'] : [config.recipient, 'COFFER_RECIPIENT'];
  if (text === null) return null;
  try {
    return parseRecipient(text);
  } catch (error) {
    if (error instanceof RecipientFormatError) throw usageError(`${source}: ${error.message}`);
    throw error;
  }
}

/** The vault passphrase: --passphrase-file, else COFFER_PASSPHRASE, else a prompt (asked twice when `confirm`). */
export async function readPassphrase(
  config: ClientConfig,
  options: { passphraseFile?: string; confirm?: boolean; signal?: AbortSignal },
): Promise<string> {
  if (options.passphraseFile) return nonEmpty(await fromFile(options.passphraseFile, '--passphrase-file'), '--passphrase-file');
  if (config.passphrase !== null) return config.passphrase;
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
    note(
      `note: the kit is from before a rekey (the vault's newest key ${older.newest}, seen here since ${older.seenAt}, ` +
        'is not in it): it reads the backups made before the rekey, not the newer ones. Print a new kit with `coffer kit`.',
    );
  }
  return kit;
}

// ---- progress ----

export interface Progress {
  update(value: number, total?: number): void;
  /** Shows 100 % at the current value (the total was an estimate). */
  complete(): void;
  stop(): void;
}

/** A bytes/rate/ETA bar on stderr, only when stdout is a terminal (and not --json); silent otherwise. */
export function progressBar(label: string, json: boolean): Progress {
  if (json || !process.stdout.isTTY) return { update: () => undefined, complete: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    {
      format: `${label} [{bar}] {percentage}% | {done} / {size} | {rate} | ETA {eta_formatted}`,
      stream: process.stderr,
      hideCursor: true,
      etaBuffer: 64,
      fps: 8,
    },
    cliProgress.Presets.shades_classic,
  );
  const started = Date.now();
  let running = false;
  let lastTotal = 0;
  let lastValue = 0;
  return {
    update(value, total) {
      const size = total !== undefined && Number.isFinite(total) ? Math.max(total, value) : Math.max(lastTotal, value);
      const seconds = (Date.now() - started) / 1000;
      const payload = { done: bytes(value), size: bytes(size), rate: seconds > 0 ? `${bytes(value / seconds)}/s` : '-' };
      if (!running) {
        bar.start(size, value, payload);
        running = true;
      } else if (size !== lastTotal) bar.setTotal(size);
      lastTotal = size;
      lastValue = value;
      bar.update(value, payload);
    },
    complete() {
      if (!running) return;
      bar.setTotal(lastValue);
      lastTotal = lastValue;
      bar.update(lastValue);
    },
    stop() {
      if (running) bar.stop();
      running = false;
    },
  };
}

// ---- formatting ----

/** Byte counts in the terminal: binary units, one decimal at every size, '-' when unknown. */
export const bytes = (n: number | null | undefined): string => formatBytes(n, { empty: '-', fixed: true });

export function localTime(iso: string | Date): string {
  const date = typeof iso === 'string' ? new Date(iso) : iso;
  return date.toLocaleString(undefined, {
    weekday: 'short',
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    timeZoneName: 'short',
  });
}

/** "3 hours 12 minutes", "45 seconds". */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const parts: string[] = [];
  const units: [number, string][] = [
    [86_400, 'day'],
    [3_600, 'hour'],
    [60, 'minute'],
  ];
  let rest = s;
  for (const [size, name] of units) {
    const count = Math.floor(rest / size);
    if (count > 0) parts.push(`${count} ${name}${count === 1 ? '' : 's'}`);
    rest -= count * size;
  }
  if (parts.length === 0) return `${rest} second${rest === 1 ? '' : 's'}`;
  return parts.slice(0, 2).join(' ');
}

/** Whether a URL names this machine (localhost, 127.0.0.0/8, ::1): the server runs here. */
export function isThisMachine(url: string | undefined): boolean {
  if (!url) return false;
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  return host === 'localhost' || host.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(host) || host === '[::1]';
}

/**
 * The 429 explained in local words. The server names the caller's account and plan (details.accountId, .plan);
 * when the server is on this machine (COFFER_URL is a loopback address), whoever runs it is the operator who can
 * move the account, so the message names the command; otherwise it says what to ask the operator for.
 */
export function cadenceMessage(error: CofferApiError): string {
  const details = error.details ?? {};
  const nextAllowedAt = typeof details.nextAllowedAt === 'string' ? details.nextAllowedAt : undefined;
  const wait = error.retryAfter;
  let when = 'later';
  if (nextAllowedAt && wait !== undefined) when = `at ${localTime(nextAllowedAt)}, in ${duration(wait)}`;
  else if (nextAllowedAt) when = `at ${localTime(nextAllowedAt)}`;
  else if (wait !== undefined) when = `in ${duration(wait)}`;
  const interval = typeof details.backupInterval === 'string' ? ` (interval ${details.backupInterval})` : '';
  const accountId = typeof details.accountId === 'string' && /^[0-9a-f-]{36}$/i.test(details.accountId) ? details.accountId : undefined;
  const head = `backup refused: ${error.message.replace(/\.$/, '')}${interval}. The next backup is allowed ${when}. `;
  if (details.plan === 'pro') return `${head}Run \`coffer backup\` again then (pro is the plan with the shortest interval).`;
  if (accountId && isThisMachine(error.url)) {
    return (
      `${head}Run \`coffer backup\` again then. This server runs on this machine: as its operator, ` +
      `\`coffer admin accounts set-plan ${accountId} pro\` (run where the server runs, with its settings) allows one backup ` +
      'every 30 minutes.'
    );
  }
  const account = accountId ? ` (account ${accountId})` : '';
  return `${head}Run \`coffer backup\` again then, or ask the operator for a plan with a shorter interval${account}.`;
}

// ---- failures → exit codes ----

/** What each permission lets a key do, in the commands that need it. */
const PERMISSION_USES: Record<string, string> = {
  'backups:read': 'read backups and the vault (list, show, watch, and every command that asks for the passphrase)',
  'backups:write': 'make and delete backups or change the vault (init, backup, delete, passphrase, reset)',
  'backups:restore': 'download backups (restore)',
};

/** Text that speaks the HTTP API (paths, verbs, headers, response fields) instead of the user's commands. */
const API_INTERNALS = /\/api\/|details\.|bearer|authorization|x-api-key|content-type|\b(GET|POST|PUT|PATCH|DELETE) \//i;
const userWords = (text: string) => (API_INTERNALS.test(text) ? '' : text.trim());

/**
 * A refusal of the server as what the user should do, in terms of this CLI. The API's own `resolution` is
 * written for API callers (it names paths, headers and `details.*` fields), so known codes get their own words
 * here; an unknown code falls back to the server's text only when it does not speak API internals.
 */
export function apiErrorMessage(error: CofferApiError): string {
  const details = error.details ?? {};
  const again = 'check that COFFER_URL points at a Coffer server of a matching version';
  switch (error.code) {
    case 'backup_cadence_exceeded':
      return cadenceMessage(error);
    case 'authentication_required':
      return (
        'the server refused the API key: it is unknown, revoked or expired. Set COFFER_API_KEY to a valid key ' +
        "(create one on the console's Keys page, or ask the operator: coffer admin keys create)."
      );
    case 'insufficient_scope': {
      if (details.reason === 'append_only') {
        return (
          'this API key is append-only: it may add backups, but not delete them, reset the account or change the vault. ' +
          "Nothing was changed. Do this with the account owner's key (or in the console)."
        );
      }
      const permission = typeof details.requiredPermission === 'string' ? details.requiredPermission : undefined;
      const uses = permission ? PERMISSION_USES[permission] : undefined;
      if (!permission || !uses) return 'this API key is not allowed to do this: use a key with more permissions (set COFFER_API_KEY).';
      return (
        `this API key is not allowed to ${uses}: it lacks the ${permission} permission. Use a key that has it ` +
        `(create one on the console's Keys page, or ask the operator: coffer admin keys create --scopes ${permission}) ` +
        'and set COFFER_API_KEY to it.'
      );
    }
    case 'backup_not_found':
      return 'no such backup: check the id (`coffer list` shows your backups).';
    case 'backup_content_unavailable':
      return 'this backup has no content to restore: only READY backups can be restored (see `coffer show <id>`).';
    case 'vault_not_initialized':
      return 'the vault is not initialized: run `coffer init` first.';
    case 'vault_not_empty': {
      const remaining = typeof details.remainingBackups === 'number' ? details.remainingBackups : 'some';
      return `reset refused: ${remaining} backup(s) remain. Delete them first, or pass --delete-backups.`;
    }
    case 'vault_changed':
      return 'the vault was changed by another client meanwhile (a rekey, recovery or passphrase change elsewhere); nothing was changed: run the command again.';
    case 'upload_in_progress':
      return 'another backup of this account is being uploaded: wait until it is finished, then try again.';
    case 'invalid_backup_state':
      return `the backup is ${typeof details.status === 'string' ? details.status : 'in another state'}, so this does not apply to it (see \`coffer show <id>\`).`;
    case 'ciphertext_size_mismatch':
      return 'the server holds a different number of bytes than were uploaded: run the backup again.';
    case 'payload_too_large':
      return 'the encrypted archive is larger than the server accepts: back up a smaller directory, or split it into several backups.';
    case 'internal_error':
      return 'the server failed on its side: try again later; if it keeps failing, tell the operator.';
    case 'validation_failed':
    case 'invalid_json':
    case 'unsupported_media_type':
    case 'not_found':
    case 'method_not_allowed':
      return `the server did not accept this request: ${again}.`;
    default: {
      const text = [userWords(error.message), userWords(error.resolution)].filter(Boolean).join(' ');
      return `the server refused (${error.code})${text ? `: ${text}` : `: ${again}.`}`;
    }
  }
}

/** Turns any failure of a client command into a CliError with the exit code of docs/client.md#exit-codes. */
export function toCliError(error: unknown, json: boolean): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof ConfigError) return usageError(`invalid configuration: ${error.message}`);
  if (error instanceof ConfigPermissionError) return usageError(error.message);
  if (error instanceof ProfileError) return usageError(`invalid profile: ${error.message}`);
  if (error instanceof RecipientFormatError) return usageError(`invalid recipient: ${error.message}`);
  if (error instanceof NewerFormatError) return new CliError(`cannot open: ${error.message}`, EXIT.failure);
  if (error instanceof IntegrityError) {
    return new CliError(`integrity check failed: ${error.message}; nothing was written`, EXIT.integrity);
  }
  if (error instanceof CofferApiError) {
    if (json) process.stdout.write(`${JSON.stringify(error.body)}\n`);
    return new CliError(apiErrorMessage(error), error.status === 429 ? EXIT.cadence : EXIT.failure);
  }
  if (error instanceof StatusStreamError) return new CliError(`event stream error: ${error.message}`, EXIT.failure);
  const message = error instanceof Error ? error.message : String(error);
  return new CliError(message, EXIT.failure);
}

/** How long an interrupted command may take to clean up before it is ended anyway. */
const INTERRUPT_GRACE_MS = 2000;

/**
 * The one abort mechanism of the CLI: every command runs with this signal, which Ctrl-C (SIGINT) or SIGTERM
 * aborts; network requests, file I/O, retry sleeps and prompts all take it, clean up (upload slot, staging
 * directory) and end the command with exit 130. A second signal, or a command still running
 * INTERRUPT_GRACE_MS after the first, exits 130 at once.
 */
export function interruptible(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const exitNow = () => {
    if (process.stdin.isTTY && process.stdin.isRaw) process.stdin.setRawMode(false);
    writeHuman(process.stderr, 'coffer: interrupted');
    process.exit(EXIT.interrupted);
  };
  const onSignal = () => {
    if (controller.signal.aborted) return exitNow();
    controller.abort(new CliError('interrupted', EXIT.interrupted));
    timer = setTimeout(exitNow, INTERRUPT_GRACE_MS);
    timer.unref();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
