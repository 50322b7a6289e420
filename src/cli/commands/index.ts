/**
 * The zero-knowledge client commands (docs/client.md), one module each: init, recipient, backup, list, show, ls, restore, verify, delete,
 * watch, passphrase, rekey, kit, recover, reset, and the agent's: profile, run, schedule, agent. Every one of them
 * but `profile` takes `--profile <name>` (a profile of the config file, src/client/profiles.ts). Configuration: COFFER_URL (default http://localhost:8080), COFFER_API_KEY, and the
 * passphrase from --passphrase-file, COFFER_PASSPHRASE or a no-echo prompt (never an argument).
 * `--json` prints the API's own JSON; human text otherwise. Exit codes: 0 ok, 1 failure, 2 usage,
 * 3 cadence limit (429), 4 integrity failure, 130 interrupted (SIGINT/SIGTERM, after cleanup).
 * The shared frame (action, unlock, options, formatting, exit codes) is in ../client-io.ts and ../output.ts.
 */
import type { Command } from 'commander';
import { CLIENT_SETTINGS } from '../../config.js';
import { PROFILE_OPTION } from '../client-io.js';
import { settingsHelp } from '../settings-help.js';
import { registerAgent } from './agent.js';
import { registerBackup } from './backup.js';
import { registerDelete } from './delete.js';
import { registerInit } from './init.js';
import { registerKit } from './kit.js';
import { registerList } from './list.js';
import { registerLs } from './ls.js';
import { registerPassphrase } from './passphrase.js';
import { registerProfile } from './profile.js';
import { registerRecipient } from './recipient.js';
import { registerRecover } from './recover.js';
import { registerRekey } from './rekey.js';
import { registerReset } from './reset.js';
import { registerRestore } from './restore.js';
import { registerRun } from './run.js';
import { registerSchedule } from './schedule.js';
import { registerShow } from './show.js';
import { registerVerify } from './verify.js';
import { registerWatch } from './watch.js';

/** In the order `coffer --help` lists them. */
const CLIENT_COMMANDS: readonly ((program: Command) => void)[] = [
  registerInit,
  registerRecipient,
  registerBackup,
  registerList,
  registerShow,
  registerLs,
  registerRestore,
  registerVerify,
  registerDelete,
  registerWatch,
  registerPassphrase,
  registerRekey,
  registerKit,
  registerRecover,
  registerReset,
  registerProfile,
  registerRun,
  registerSchedule,
  registerAgent,
];

/** Adds --profile to a command and, for a group (schedule), to each of its subcommands. */
function addProfileOption(command: Command): void {
  if (command.commands.length > 0) command.commands.forEach(addProfileOption);
  else command.option(...PROFILE_OPTION);
}

export function registerClientCommands(program: Command): void {
  const before = new Set(program.commands);
  for (const register of CLIENT_COMMANDS) register(program);
  for (const command of program.commands) {
    if (!before.has(command) && command.name() !== 'profile') addProfileOption(command);
  }
  program.addHelpText('after', settingsHelp('Settings of the client commands, as environment variables', CLIENT_SETTINGS));
}
