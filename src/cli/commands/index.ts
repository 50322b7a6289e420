/**
 * The zero-knowledge client commands (docs/client.md), one module each: init, recipient, backup, list, show, ls, restore, verify, delete,
 * watch, passphrase, rekey, kit, recover, reset, and the agent's: profile, run, schedule, agent. Every one of them
 * but `profile` takes `--profile <name>` (a profile of the config file, src/cli/agent/profiles.ts). Configuration:
 * COFFER_URL (default http://localhost:8080), COFFER_API_KEY, and the
 * passphrase from --passphrase-file, COFFER_PASSPHRASE or a no-echo prompt (never an argument).
 * `--json` prints the API's own JSON; human text otherwise. Exit codes: 0 ok, 1 failure, 2 usage,
 * 3 cadence limit (429), 4 integrity failure, 130 interrupted (SIGINT/SIGTERM, after cleanup).
 * The shared frame is in ../command-frame.ts (action, options), ../secrets.ts (unlock, prompts), ../progress.ts,
 * ../format.ts, ../failures.ts (exit codes) and ../output.ts.
 */
import type { Command } from 'commander';
import { CLIENT_SETTINGS } from '../../config.js';
import { settingsHelp } from '../settings-help.js';
import { CLIENT_COMMAND_NAMES, type ClientCommandName, PROFILE_OPTION, requestedCommand } from './names.js';
import { registerVersion } from './version.js';

/** Adds a command (or a group of them) to the program. */
export type Register = (program: Command) => void;

/**
 * A top-level command: its name and how to load its module. Only the module of the command that runs is loaded
 * (see registerCommands), so a command does not pay for the start-up of every other one.
 */
export interface CommandEntry {
  name: string;
  load: () => Promise<Register>;
  /** Takes `--profile <name>` (every client command but `profile` itself). */
  profile?: boolean;
}

/** Each client command's module. The specifiers are literal: scripts/pack-cli.mjs follows them. */
const LOADERS: Record<ClientCommandName, () => Promise<Register>> = {
  init: async () => (await import('./init.js')).registerInit,
  recipient: async () => (await import('./recipient.js')).registerRecipient,
  backup: async () => (await import('./backup.js')).registerBackup,
  list: async () => (await import('./list.js')).registerList,
  show: async () => (await import('./show.js')).registerShow,
  ls: async () => (await import('./ls.js')).registerLs,
  restore: async () => (await import('./restore.js')).registerRestore,
  verify: async () => (await import('./verify.js')).registerVerify,
  delete: async () => (await import('./delete.js')).registerDelete,
  watch: async () => (await import('./watch.js')).registerWatch,
  passphrase: async () => (await import('./passphrase.js')).registerPassphrase,
  rekey: async () => (await import('./rekey.js')).registerRekey,
  kit: async () => (await import('./kit.js')).registerKit,
  recover: async () => (await import('./recover.js')).registerRecover,
  reset: async () => (await import('./reset.js')).registerReset,
  profile: async () => (await import('./profile.js')).registerProfile,
  run: async () => (await import('./run.js')).registerRun,
  schedule: async () => (await import('./schedule.js')).registerSchedule,
  agent: async () => (await import('./agent.js')).registerAgent,
};

export const CLIENT_COMMANDS: readonly CommandEntry[] = CLIENT_COMMAND_NAMES.map((name) => ({
  name,
  load: LOADERS[name],
  profile: name !== 'profile',
}));

export const VERSION_COMMAND: CommandEntry = { name: 'version', load: () => Promise.resolve(registerVersion) };

/** Adds --profile to a command and, for a group (schedule), to each of its subcommands. */
function addProfileOption(command: Command): void {
  if (command.commands.length > 0) command.commands.forEach(addProfileOption);
  else command.option(...PROFILE_OPTION);
}

/**
 * Registers the command `argv` runs, alone; or, for anything else (help, `--version`, completion, an unknown name,
 * which commander then reports with its suggestions), every command in `entries` and then `finish(program)`.
 */
/**
 * After a usage error (a mistyped command, an unknown option, a missing argument) each command prints commander's
 * one-line error (with its "Did you mean …?") and a pointer to its own help, not the whole help: the root's help
 * runs to some 70 lines with the settings, and the suggestion would scroll away above it.
 */
function pointToHelp(command: Command, path: string[] = []): void {
  const name = ['coffer', ...path].join(' ');
  command.showHelpAfterError(path.length === 0 ? `(\`coffer --help\` lists the commands)` : `(\`${name} --help\` shows its usage)`);
  for (const sub of command.commands) pointToHelp(sub, [...path, sub.name()]);
}

export async function registerCommands(
  program: Command,
  entries: readonly CommandEntry[],
  argv: readonly string[],
  finish: (program: Command) => void | Promise<void>,
): Promise<void> {
  const wanted = requestedCommand(argv);
  const one = entries.find((entry) => entry.name === wanted);
  const chosen = one ? [one] : entries;
  // Every module loads at once (one pass of the module loader over what they share), then registers in order.
  const registers = await Promise.all(chosen.map((entry) => entry.load()));
  for (const [i, entry] of chosen.entries()) {
    const before = new Set(program.commands);
    registers[i]!(program);
    if (!entry.profile) continue;
    for (const command of program.commands) if (!before.has(command)) addProfileOption(command);
  }
  pointToHelp(program);
  if (one) return;
  program.addHelpText('after', settingsHelp('Settings of the client commands, as environment variables', CLIENT_SETTINGS));
  await finish(program);
}
