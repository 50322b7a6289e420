/**
 * The frame every client command (src/cli/commands/) runs in: its shared options, the settings (environment over the
 * selected profile), the abort signal, and the SDK client for the configured server. Failures leave the frame as
 * exit codes (./failures.ts).
 */
import {
  CLIENT_VERSION,
  CofferClient,
  isKdfProfile,
  KDF_PROFILE_NAMES,
  KDF_PROFILES,
  type KdfProfile,
  parseRecipient,
  type Recipient,
  RecipientFormatError,
} from '../client/index.js';
import { type Profile, resolveApiKey, selectProfile } from './agent/profiles.js';
import {
  type ClientConfig,
  givenOverProfile,
  loadClientConfig,
  PROFILE_VARIABLES,
  type ProfileSettings,
  type ProfileVariable,
} from '../config.js';
import { interruptible, toCliError } from './failures.js';
import { note, usageError } from './output.js';

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
export interface CommandContext {
  signal: AbortSignal;
  config: ClientConfig;
  profile: SelectedProfile | null;
  /** Where config.recipient came from, for the stderr line that says what a backup seals to; null: no recipient. */
  recipientFrom?: 'COFFER_RECIPIENT' | 'the profile' | null;
}

/** The variables that name the account a command talks to: set, they keep the file's default profile out. */
const ACCOUNT_VARIABLES = ['COFFER_URL', 'COFFER_API_KEY'] as const satisfies readonly ProfileVariable[];

const canonicalRecipient = (text: string) => text.trim().toLowerCase();

/**
 * The settings of a client command, decided in this one place (docs/client.md#profiles, "Which settings apply"):
 *
 * - A profile applies when it is named (--profile, else COFFER_PROFILE), or as the file's default when the
 *   environment names no account of its own (neither COFFER_URL nor COFFER_API_KEY is set). A command with
 *   another server or key in the environment never gets the default profile's key, recipient, paths or chain.
 * - When a profile applies, the environment may repeat its values but not contradict them: a variable that names
 *   another server, key, blob host or recipient than the named profile is an error (exit 2), and so is one set to
 *   nothing where the profile has a value (an empty COFFER_API_KEY is never silently the profile's key).
 * - Command-line options (--recipient, --passphrase-file) apply to their command and win over both.
 *
 * The profile's API key is fetched from its file or command only when the profile applies.
 */
export async function loadSettings(
  requested: string | undefined,
  signal: AbortSignal,
  env?: Record<string, string | undefined>,
): Promise<{ config: ClientConfig; profile: SelectedProfile | null; recipientFrom: CommandContext['recipientFrom'] }> {
  const base = loadClientConfig(env);
  const given = givenOverProfile(env);
  const fromEnvironment = { config: base, profile: null, recipientFrom: base.recipient === null ? null : ('COFFER_RECIPIENT' as const) };
  const selected = await selectProfile(base.configDir, requested ?? base.profileName);
  if (!selected) return fromEnvironment;
  const { name, profile } = selected;
  if (!selected.named) {
    const naming = ACCOUNT_VARIABLES.filter((variable) => given[variable] !== undefined);
    if (naming.length > 0) {
      note(
        `note: ${naming.join(' and ')} ${naming.length > 1 ? 'are' : 'is'} set, so the default profile ${name} is not used ` +
          `(its key, recipient and history chain stay out of this command; --profile ${name} uses it)`,
      );
      return fromEnvironment;
    }
  }
  const supplied: ProfileSettings = {
    COFFER_URL: profile.url,
    ...(profile.blobApiUrl ? { COFFER_BLOB_API_URL: profile.blobApiUrl } : {}),
    ...(profile.recipient ? { COFFER_RECIPIENT: profile.recipient } : {}),
  };
  const how = selected.named ? `profile ${name}` : `the default profile ${name}`;
  const conflict = (variable: ProfileVariable, what: string) =>
    usageError(
      `${variable} ${what}, but ${how} is in use and has its own: this command would mix two accounts. ` +
        `Unset ${variable} to use the profile, or leave the profile out (${selected.named ? 'without --profile/COFFER_PROFILE' : `unset it as the default`}) to use the environment`,
    );
  for (const variable of PROFILE_VARIABLES) {
    const own = variable === 'COFFER_API_KEY' ? 'key' : supplied[variable as keyof ProfileSettings];
    if (own !== undefined && base.emptySettings.includes(variable)) throw conflict(variable, 'is set to nothing');
  }
  const fromProfile = loadClientConfig({}, supplied);
  if (given.COFFER_URL !== undefined && base.url !== fromProfile.url) throw conflict('COFFER_URL', `names ${base.url}`);
  if (given.COFFER_BLOB_API_URL !== undefined && supplied.COFFER_BLOB_API_URL !== undefined && base.blobApiUrl !== fromProfile.blobApiUrl)
    throw conflict('COFFER_BLOB_API_URL', `names ${base.blobApiUrl}`);
  if (
    given.COFFER_RECIPIENT !== undefined &&
    profile.recipient &&
    canonicalRecipient(given.COFFER_RECIPIENT) !== canonicalRecipient(profile.recipient)
  )
    throw conflict('COFFER_RECIPIENT', 'names another recipient');
  const key = await resolveApiKey(base.configDir, profile.apiKey, signal);
  if (given.COFFER_API_KEY !== undefined && given.COFFER_API_KEY !== key) throw conflict('COFFER_API_KEY', 'is another key');
  supplied.COFFER_API_KEY = key;
  const config = loadClientConfig(env, supplied);
  const recipientFrom = config.recipient === null ? null : given.COFFER_RECIPIENT !== undefined ? 'COFFER_RECIPIENT' : 'the profile';
  return { config, profile: { name, profile }, recipientFrom };
}

/**
 * Runs a command body with the CLI's abort signal (Ctrl-C, SIGTERM) and the settings (loadSettings), mapping
 * every failure to the right exit code and message. After an interruption, whatever broke first, the command
 * ends as "interrupted" (exit 130) once its cleanup is done.
 */
export function action<A extends unknown[]>(body: (context: CommandContext, ...args: A) => Promise<void>) {
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
export function plainAction<A extends unknown[]>(body: (context: CommandContext, ...args: A) => Promise<void>) {
  return async (...args: A): Promise<void> => {
    const options = args.find((a): a is JsonOption => typeof a === 'object' && a !== null && !Array.isArray(a)) ?? {};
    const { signal, dispose } = interruptible();
    try {
      await body({ signal, config: loadClientConfig(), profile: null, recipientFrom: null }, ...args);
    } catch (error) {
      throw toCliError(signal.aborted ? signal.reason : error, !!options.json);
    } finally {
      dispose();
    }
  };
}

/** The SDK client for the configured server: every command that talks to it needs COFFER_API_KEY. */
export function clientFor(config: ClientConfig): CofferClient {
  if (config.apiKey === null) throw usageError('COFFER_API_KEY is not set: export the API key the operator gave you');
  const blobApiUrl = config.blobApiUrl ?? undefined;
  return new CofferClient({
    baseUrl: config.url,
    apiKey: config.apiKey,
    blobApiUrl,
    userAgent: CLIENT_VERSION,
    requestTimeoutMs: config.requestTimeoutMs,
    stallWindowMs: config.stallWindowMs,
  });
}

/** The Argon2id profile of a new wrapping: --kdf, else COFFER_KDF, else the default. */
export function kdfProfile(option: string | undefined, config: ClientConfig): KdfProfile {
  if (option === undefined) return config.kdf;
  if (!isKdfProfile(option)) {
    throw usageError(`unknown key-derivation profile "${option}" (expected ${KDF_PROFILE_NAMES.join(', ')})`);
  }
  return option;
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
