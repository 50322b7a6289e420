/**
 * Profiles (docs/client.md#profiles): `$XDG_CONFIG_HOME/coffer/config.json` names, per profile, the server, where
 * the API key comes from (a file or a command, never the key itself), the recipient, what to back up, hooks and
 * notifications. The file is validated with a schema; every error names the field (`profiles.home.url: …`).
 * Written atomically with mode 0600 (it names webhook URLs, which are secrets of a kind).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

export const CONFIG_FILE_NAME = 'config.json';
/** A profile name is also part of systemd unit names and state file names: letters, digits, `-` and `_`. */
export const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/;
export const DEFAULT_HOOK_TIMEOUT_SECONDS = 300;
/** The deadline of one agent run (docs/client.md#deadlines): far above a normal run, so it only ends a stuck one. */
export const DEFAULT_RUN_TIMEOUT_MINUTES = 720;
const MAX_CONFIG_BYTES = 1024 * 1024;
/** How long an API key command may run. */
const KEY_COMMAND_TIMEOUT_MS = 30_000;

export class ProfileError extends Error {
  override readonly name = 'ProfileError';
}

/** The config file or its folder may be changed by someone else: it is not read (like ssh with its files). */
export class ConfigPermissionError extends ProfileError {}

const modeText = (mode: number) => `mode ${(mode & 0o7777).toString(8).padStart(4, '0')}`;

/**
 * The config file names the commands coffer runs (hooks, the API key command): like ssh, it is refused when anyone
 * but its owner could have changed it. The file and its folder must not be writable by group or others and must
 * belong to the user running coffer (or root). Not on systems without uids (Windows).
 */
export function checkConfigOwnership(file: string, stat: fs.Stats | null, folderStat: fs.Stats): void {
  const uid = process.getuid?.();
  if (uid === undefined) return;
  const folder = path.dirname(file);
  const refuse = (what: string, why: string, fix: string) =>
    new ConfigPermissionError(
      `refusing to read ${file}: ${what} ${why}. It names commands coffer runs (hooks, the API key command), so only you may be able to change it; ${fix}`,
    );
  const checks: [string, string, fs.Stats][] = [['its folder', folder, folderStat]];
  if (stat) checks.unshift(['the file', file, stat]);
  for (const [what, target, st] of checks) {
    if (st.uid !== uid && st.uid !== 0)
      throw refuse(what, `is owned by uid ${st.uid}, not by you (uid ${uid})`, `fix: chown ${uid} ${target}`);
    if ((st.mode & 0o022) !== 0) {
      const writers = [st.mode & 0o020 ? 'its group' : '', st.mode & 0o002 ? 'all users' : ''].filter(Boolean).join(' and ');
      throw refuse(what, `is writable by ${writers} (${modeText(st.mode)})`, `fix: chmod go-w ${target}`);
    }
  }
}

const httpUrl = z.string().refine((value) => {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}, 'expected an http(s) URL');

const command = z.string().trim().min(1, 'expected a command').max(4096);

const ApiKeySource = z.union([z.strictObject({ file: z.string().min(1, 'expected a file name') }), z.strictObject({ command })], {
  error: 'expected {"file": "<path>"} or {"command": "<shell command>"} (the key itself is never stored here)',
});

/** A notification target: a URL that receives a POST of the JSON summary (ntfy, chat webhooks, anything). */
const Targets = z.array(httpUrl).max(8);

/** How often the agent drills a profile's backups (docs/client.md#restore-drills). */
export const DRILL_SETTINGS = ['off', 'daily', 'weekly'] as const;
export type DrillSetting = (typeof DRILL_SETTINGS)[number];

/** A profile that seals to a recipient is a backup host's: it holds no passphrase, so it cannot drill. */
export const DRILL_ON_HOST_PROFILE =
  'a profile with a recipient runs on a backup host, which holds no passphrase and cannot open a backup to drill it: ' +
  'set "drill" on a profile of a machine with the passphrase (the owner\'s workstation), or leave it "off" here';

export const ProfileSchema = z
  .strictObject({
    url: httpUrl,
    apiKey: ApiKeySource,
    blobApiUrl: httpUrl.optional(),
    recipient: z
      .string()
      .regex(/^coffer1[02-9ac-hj-np-z]+$/, 'expected a recipient string (coffer1…, from `coffer recipient`)')
      .optional(),
    paths: z.array(z.string().min(1, 'expected a path')).min(1, 'expected at least one path to back up'),
    excludes: z.array(z.string().min(1, 'expected a pattern')).default([]),
    name: z.string().min(1).max(200).optional(),
    runTimeoutMinutes: z
      .number('expected a whole number of minutes')
      .int()
      .min(1, 'expected 1 minute or more')
      .max(10_080, 'expected at most 10080 minutes (a week)')
      .default(DEFAULT_RUN_TIMEOUT_MINUTES),
    hooks: z
      .strictObject({
        before: command.optional(),
        after: command.optional(),
        onFailure: command.optional(),
        timeoutSeconds: z
          .number('expected a whole number of seconds')
          .int()
          .min(1, 'expected 1 second or more')
          .max(86_400, 'expected at most 86400 seconds (a day)')
          .default(DEFAULT_HOOK_TIMEOUT_SECONDS),
      })
      .default({ timeoutSeconds: DEFAULT_HOOK_TIMEOUT_SECONDS }),
    notify: z
      .strictObject({
        /** healthchecks.io style: `<url>/start` before, `<url>` on success, `<url>/fail` on failure. */
        healthchecks: httpUrl.optional(),
        success: Targets.default([]),
        failure: Targets.default([]),
        overdue: Targets.default([]),
      })
      .default({ success: [], failure: [], overdue: [] }),
    drill: z.enum(DRILL_SETTINGS, 'expected "off", "daily" or "weekly"').default('off'),
  })
  .superRefine((profile, context) => {
    if (profile.recipient && profile.drill !== 'off') context.addIssue({ code: 'custom', path: ['drill'], message: DRILL_ON_HOST_PROFILE });
  });

export type Profile = z.output<typeof ProfileSchema>;
export type ProfileInput = z.input<typeof ProfileSchema>;

const ConfigSchema = z.strictObject({
  version: z.literal(1, 'expected 1'),
  default: z.string().optional(),
  profiles: z.record(z.string().regex(PROFILE_NAME, 'a profile name is 1-40 letters, digits, "-" or "_"'), ProfileSchema).default({}),
});

export type ProfilesFile = z.output<typeof ConfigSchema>;

/** `profiles.home.notify.success[0]` from a zod path. */
function fieldName(where: readonly PropertyKey[]): string {
  let out = '';
  for (const part of where) out += typeof part === 'number' ? `[${part}]` : `${out ? '.' : ''}${String(part)}`;
  return out || '(the file)';
}

function problems(error: z.ZodError, prefix: readonly PropertyKey[] = []): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => {
      // An unknown key is named as the field itself, not as its parent.
      const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
      const where = keys.length === 1 ? [...prefix, ...issue.path, keys[0]!] : [...prefix, ...issue.path];
      const message = keys.length === 1 ? 'unknown field' : issue.message;
      return `${fieldName(where)}: ${message}`;
    })
    .join('; ');
}

/** Parses and validates the text of a config file; ProfileError naming the field otherwise. */
export function parseProfilesFile(text: string, file: string): ProfilesFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new ProfileError(`${file} is not JSON: ${(error as Error).message}`);
  }
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) throw new ProfileError(`${file}: ${problems(parsed.error)}`);
  if (parsed.data.default !== undefined && !(parsed.data.default in parsed.data.profiles)) {
    throw new ProfileError(`${file}: default: no profile is named ${JSON.stringify(parsed.data.default)}`);
  }
  return parsed.data;
}

/** A profile as given on a command line, validated exactly like one in the file. */
export function validateProfile(name: string, input: unknown): Profile {
  if (!PROFILE_NAME.test(name)) throw new ProfileError(`profile name ${JSON.stringify(name)}: use 1-40 letters, digits, "-" or "_"`);
  const parsed = ProfileSchema.safeParse(input);
  if (!parsed.success) throw new ProfileError(problems(parsed.error, ['profiles', name]));
  return parsed.data;
}

export const configFile = (configDir: string): string => path.join(configDir, CONFIG_FILE_NAME);

/** The config file, or an empty one when it does not exist; refused when others could change it (checkConfigOwnership). */
export async function readProfiles(configDir: string): Promise<ProfilesFile> {
  const file = configFile(configDir);
  let text: string;
  try {
    const handle = await fsp.open(file, 'r');
    try {
      // The file as opened (not a name that could be swapped in between) and the folder it is in.
      const stat = await handle.stat();
      checkConfigOwnership(file, stat, await fsp.stat(path.dirname(file)));
      if (stat.size > MAX_CONFIG_BYTES) throw new ProfileError(`${file} is larger than 1 MiB: not a Coffer config file`);
      text = await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, profiles: {} };
    if (error instanceof ProfileError) throw error;
    throw new ProfileError(`cannot read ${file}: ${(error as Error).message}`);
  }
  return parseProfilesFile(text, file);
}

/** Writes the file atomically (temp file + rename), mode 0600, its directory 0700 (refused in a folder others can change). */
export async function writeProfiles(configDir: string, data: ProfilesFile): Promise<string> {
  const file = configFile(configDir);
  await fsp.mkdir(configDir, { recursive: true, mode: 0o700 });
  checkConfigOwnership(file, null, await fsp.stat(configDir)); // never written into a folder others can change
  const temp = `${file}.${process.pid}.tmp`;
  await fsp.writeFile(temp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 });
  await fsp.rename(temp, file);
  return file;
}

/**
 * The profile to use: `requested` (--profile, else COFFER_PROFILE), else the file's default, else none (null);
 * `named` tells the first from the second. A requested name that the file does not hold is an error.
 */
export async function selectProfile(
  configDir: string,
  requested: string | null,
): Promise<{ name: string; profile: Profile; named: boolean } | null> {
  const data = await readProfiles(configDir);
  const name = requested ?? data.default ?? null;
  if (name === null) return null;
  const profile = data.profiles[name];
  if (!profile) {
    const known = Object.keys(data.profiles);
    throw new ProfileError(
      `no profile named ${JSON.stringify(name)} in ${configFile(configDir)}` +
        (known.length ? ` (profiles: ${known.join(', ')})` : ' (it has no profiles: `coffer profile add`)'),
    );
  }
  return { name, profile, named: requested !== null };
}

/** A relative key file is relative to the config directory. */
export const keyFilePath = (configDir: string, file: string): string => path.resolve(configDir, file);

/** Reads the API key from its source: the first line of a file, or the first line a command prints. */
export async function resolveApiKey(configDir: string, source: Profile['apiKey'], signal?: AbortSignal): Promise<string> {
  let output: string;
  if ('file' in source) {
    const file = keyFilePath(configDir, source.file);
    try {
      output = await fsp.readFile(file, 'utf8');
    } catch (error) {
      throw new ProfileError(`cannot read the API key file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  } else {
    output = await new Promise<string>((resolve, reject) => {
      execFile(
        '/bin/sh',
        ['-c', source.command],
        { timeout: KEY_COMMAND_TIMEOUT_MS, maxBuffer: 64 * 1024, signal, encoding: 'utf8' },
        (error, stdout) => {
          if (error) reject(new ProfileError(`the API key command failed (${error.code ?? error.signal ?? 'error'}): ${source.command}`));
          else resolve(stdout);
        },
      );
    });
  }
  const key = output.split(/\r?\n/)[0]!.trim();
  if (key === '')
    throw new ProfileError('file' in source ? `the API key file ${source.file} is empty` : 'the API key command printed nothing');
  return key;
}

/** Whether a key file can be read by others than its owner (a note, not an error). */
export function keyFileIsShared(file: string): boolean {
  try {
    return (fs.statSync(file).mode & 0o077) !== 0;
  } catch {
    return false;
  }
}
