/**
 * `coffer profile add|list|show|remove`: the profiles of `$XDG_CONFIG_HOME/coffer/config.json` (docs/client.md#profiles).
 * The API key is never written into the config file: `--api-key-file` or `--api-key-command` name where it comes
 * from, and `--api-key-stdin` stores it in its own 0600 file next to the config.
 */
import type { Command } from 'commander';
import fsp from 'node:fs/promises';
import path from 'node:path';
import {
  configFile,
  keyFileIsShared,
  keyFilePath,
  type Profile,
  type ProfileInput,
  readProfiles,
  validateProfile,
  writeProfiles,
} from '../agent/profiles.js';
import { plainAction, recipientFor } from '../command-frame.js';
import { note, print, printJson, usageError } from '../output.js';

const collect = (value: string, previous: string[]) => [...previous, value];

interface AddOptions {
  url?: string;
  apiKeyFile?: string;
  apiKeyCommand?: string;
  apiKeyStdin?: boolean;
  blobApiUrl?: string;
  recipient?: string;
  path: string[];
  exclude: string[];
  name?: string;
  before?: string;
  after?: string;
  onFailure?: string;
  hookTimeout?: string;
  healthchecks?: string;
  notifySuccess: string[];
  notifyFailure: string[];
  notifyOverdue: string[];
  drill?: string;
  default?: boolean;
  force?: boolean;
  json?: boolean;
}

/** Advice printed by `profile add` and `schedule install` for a profile without a recipient (docs/client.md#a-backup-host). */
export const HOST_ADVICE =
  'On a backup host, use a write-only append-only API key (coffer admin keys create --append-only --scopes backups:write ' +
  '--account <id>, or the console\'s "Add a backup host") and a recipient instead of the passphrase: then nothing on this ' +
  'host can read or destroy your backups, and it never holds the wrapped vault key. It only gives up the chain-head ' +
  'check, which `coffer list --chain` runs where you restore.';

async function readKeyFromStdin(): Promise<string> {
  if (process.stdin.isTTY) throw usageError('--api-key-stdin: pipe the key in (printf %s "$KEY" | coffer profile add …)');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 4096) throw usageError('--api-key-stdin: that is too long to be an API key');
    chunks.push(chunk);
  }
  const key = Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0]!.trim();
  if (key === '') throw usageError('--api-key-stdin: nothing was read');
  return key;
}

export function registerProfile(program: Command): void {
  const profile = program
    .command('profile')
    .description('manage the profiles of the config file (server, key source, paths, hooks, notifications)');
  registerProfileAdd(profile);
  registerProfileList(profile);
  registerProfileShow(profile);
  registerProfileRemove(profile);
}

/** `coffer profile add <name>`. */
function registerProfileAdd(profile: Command): void {
  profile
    .command('add <name>')
    .description('add (or with --force replace) a profile')
    .option('--url <url>', 'the Coffer server (required)')
    .option('--api-key-file <file>', 'read the API key from this file at each run (relative: to the config directory)')
    .option('--api-key-command <command>', 'run this shell command at each run; the first line it prints is the API key')
    .option('--api-key-stdin', 'read the key from stdin now and keep it in <config dir>/keys/<name>.key (mode 0600)')
    .option('--blob-api-url <url>', 'blob host of a blobhost-client server')
    .option('--recipient <recipient>', 'seal backups to this recipient (`coffer recipient`): no passphrase on this host')
    .option('--path <path>', 'a path to back up (repeatable; kept absolute)', collect, [])
    .option('--exclude <pattern>', 'a pattern to leave out (repeatable)', collect, [])
    .option('--name <name>', 'name kept in the encrypted metadata')
    .option('--before <command>', 'shell command before each backup (a failure stops the backup)')
    .option('--after <command>', 'shell command after each backup that `before` started (COFFER_OUTCOME says how it went)')
    .option('--on-failure <command>', 'shell command when a run fails')
    .option('--hook-timeout <seconds>', 'how long a hook may run (default 300)')
    .option('--healthchecks <url>', 'healthchecks-style ping URL: <url>/start, <url>, <url>/fail')
    .option('--notify-success <url>', 'POST a JSON summary here after a successful backup (repeatable)', collect, [])
    .option('--notify-failure <url>', 'POST a JSON summary here when a run fails (repeatable)', collect, [])
    .option(
      '--notify-overdue <url>',
      'POST a JSON summary here when no backup succeeded within twice the interval (repeatable)',
      collect,
      [],
    )
    .option(
      '--drill <how-often>',
      'restore drills by the agent: off (default), daily or weekly (the newest backup and a random older one, checked ' +
        'and recorded; needs the passphrase, so never on a backup host)',
    )
    .option('--default', 'make it the default profile (the first profile is the default anyway)')
    .option('--force', 'replace a profile of that name')
    .option('--json', 'print the saved profile as JSON')
    .action(
      plainAction(async ({ config }, name: string, options: AddOptions) => {
        const sources = [options.apiKeyFile, options.apiKeyCommand, options.apiKeyStdin].filter((s) => s !== undefined);
        if (sources.length !== 1) throw usageError('give exactly one of --api-key-file, --api-key-command, --api-key-stdin');
        if (options.url === undefined) throw usageError('--url is required');
        const data = await readProfiles(config.configDir);
        if (data.profiles[name] && !options.force) throw usageError(`profile ${name} exists: pass --force to replace it`);
        let keyFile: string | undefined;
        let apiKey: ProfileInput['apiKey'];
        if (options.apiKeyCommand !== undefined) apiKey = { command: options.apiKeyCommand };
        else if (options.apiKeyFile !== undefined) apiKey = { file: path.resolve(options.apiKeyFile) };
        else {
          keyFile = path.join(config.configDir, 'keys', `${name}.key`);
          apiKey = { file: keyFile };
        }
        let hookTimeout: number | undefined;
        if (options.hookTimeout !== undefined) {
          hookTimeout = /^\d+$/.test(options.hookTimeout) ? Number(options.hookTimeout) : NaN;
        }
        // The one recipient reader, as for `coffer backup --recipient`: a fault is refused now, not at the first run;
        // the profile keeps the canonical (lower-case) string.
        const recipient = options.recipient !== undefined ? recipientFor(options.recipient, config) : null;
        const input: ProfileInput = {
          url: options.url,
          apiKey,
          ...(options.blobApiUrl ? { blobApiUrl: options.blobApiUrl } : {}),
          ...(recipient ? { recipient: recipient.text } : {}),
          paths: options.path.map((p) => path.resolve(p)),
          excludes: options.exclude,
          ...(options.name ? { name: options.name } : {}),
          hooks: {
            ...(options.before ? { before: options.before } : {}),
            ...(options.after ? { after: options.after } : {}),
            ...(options.onFailure ? { onFailure: options.onFailure } : {}),
            ...(hookTimeout !== undefined ? { timeoutSeconds: hookTimeout } : {}),
          },
          notify: {
            ...(options.healthchecks ? { healthchecks: options.healthchecks } : {}),
            success: options.notifySuccess,
            failure: options.notifyFailure,
            overdue: options.notifyOverdue,
          },
          ...(options.drill !== undefined ? { drill: options.drill as Profile['drill'] } : {}),
        };
        const validated = validateProfile(name, input);
        if (keyFile !== undefined) {
          const key = await readKeyFromStdin();
          await fsp.mkdir(path.dirname(keyFile), { recursive: true, mode: 0o700 });
          await fsp.writeFile(keyFile, `${key}\n`, { mode: 0o600 });
          await fsp.chmod(keyFile, 0o600);
        } else if ('file' in validated.apiKey && keyFileIsShared(keyFilePath(config.configDir, validated.apiKey.file))) {
          note(`warning: ${validated.apiKey.file} can be read by other users: chmod 600 it`);
        }
        data.profiles[name] = validated;
        if (options.default || data.default === undefined) data.default = name;
        const file = await writeProfiles(config.configDir, data);
        if (!validated.recipient) {
          note('note: no recipient: each run asks for the passphrase (COFFER_PASSPHRASE or --passphrase-file)');
          note(HOST_ADVICE);
        }
        if (options.json) return printJson({ name, default: data.default === name, profile: validated });
        print(`profile ${name} saved in ${file}${data.default === name ? ' (the default profile)' : ''}`);
      }),
    );
}

/** `coffer profile list`. */
function registerProfileList(profile: Command): void {
  profile
    .command('list')
    .description('list the profiles')
    .option('--json', 'print {"default": …, "profiles": {name: profile}}')
    .action(
      plainAction(async ({ config }, options: { json?: boolean }) => {
        const data = await readProfiles(config.configDir);
        if (options.json) return printJson({ default: data.default ?? null, profiles: data.profiles });
        const names = Object.keys(data.profiles);
        if (names.length === 0) return print(`no profiles (${configFile(config.configDir)}): coffer profile add <name> …`);
        for (const name of names) {
          const p = data.profiles[name]!;
          print(`${name === data.default ? '*' : ' '} ${name}  ${p.url}  ${p.paths.join(' ')}`);
        }
      }),
    );
}

/** `coffer profile show <name>`. */
function registerProfileShow(profile: Command): void {
  profile
    .command('show <name>')
    .description('show one profile (the key source, never the key)')
    .option('--json', 'print the profile as JSON')
    .action(
      plainAction(async ({ config }, name: string, options: { json?: boolean }) => {
        const data = await readProfiles(config.configDir);
        const p = data.profiles[name];
        if (!p) throw usageError(`no profile named ${JSON.stringify(name)}`);
        if (options.json) return printJson({ name, default: data.default === name, profile: p });
        const hooks = (['before', 'after', 'onFailure'] as const).filter((h) => p.hooks[h]).map((h) => `${h}: ${p.hooks[h]}`);
        print(
          [
            `profile:     ${name}${data.default === name ? ' (default)' : ''}`,
            `server:      ${p.url}`,
            `api key:     ${'file' in p.apiKey ? `file ${p.apiKey.file}` : `command ${p.apiKey.command}`}`,
            `recipient:   ${p.recipient ?? '- (the passphrase)'}`,
            `paths:       ${p.paths.join(' ')}`,
            `excludes:    ${p.excludes.join(' ') || '-'}`,
            `hooks:       ${hooks.join('; ') || '-'} (timeout ${p.hooks.timeoutSeconds} s)`,
            `healthchecks:${p.notify.healthchecks ? ` ${new URL(p.notify.healthchecks).origin}/…` : ' -'}`,
            `notify:      ${p.notify.success.length} on success, ${p.notify.failure.length} on failure, ${p.notify.overdue.length} when overdue`,
            `drills:      ${p.drill === 'off' ? 'off' : `${p.drill} (the newest backup and a random older one)`}`,
          ].join('\n'),
        );
      }),
    );
}

/** `coffer profile remove <name>`. */
function registerProfileRemove(profile: Command): void {
  profile
    .command('remove <name>')
    .description('remove a profile (and the key file --api-key-stdin made for it); its chain state is kept')
    .option('--json', 'print {"removed": name}')
    .action(
      plainAction(async ({ config }, name: string, options: { json?: boolean }) => {
        const data = await readProfiles(config.configDir);
        const p = data.profiles[name];
        if (!p) throw usageError(`no profile named ${JSON.stringify(name)}`);
        delete data.profiles[name];
        if (data.default === name) delete data.default;
        await writeProfiles(config.configDir, data);
        const ownKey = path.join(config.configDir, 'keys', `${name}.key`);
        if ('file' in p.apiKey && keyFilePath(config.configDir, p.apiKey.file) === ownKey) await fsp.rm(ownKey, { force: true });
        if (options.json) return printJson({ removed: name });
        print(`profile ${name} removed`);
      }),
    );
}
