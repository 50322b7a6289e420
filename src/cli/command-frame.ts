/**
 * The frame every client command (src/cli/commands/) runs in: its shared options, the settings (environment over the
 * selected profile), the abort signal, and the SDK client for the configured server. Failures leave the frame as
 * exit codes (./failures.ts).
 */
import { isKdfProfile, KDF_PROFILES, type KdfProfile, parseRecipient, type Recipient, RecipientFormatError } from '../client/envelope.js';
import { KDF_PROFILE_NAMES } from '../client/envelope-format.js';
import { CLIENT_VERSION } from '../client/backup.js';
import { CofferClient } from '../client/sdk.js';
import { type Profile, resolveApiKey, selectProfile } from '../client/profiles.js';
import { type ClientConfig, givenOverProfile, loadClientConfig, type ProfileSettings } from '../config.js';
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
      await body({ signal, config: loadClientConfig(), profile: null }, ...args);
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
