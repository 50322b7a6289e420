/**
 * The client commands, in the order `coffer --help` lists them. Kept apart from their modules so that the entry
 * (../main.ts) can tell a client command from the rest without loading anything.
 */
export const CLIENT_COMMAND_NAMES = [
  'init',
  'recipient',
  'backup',
  'list',
  'show',
  'ls',
  'restore',
  'verify',
  'delete',
  'watch',
  'passphrase',
  'rekey',
  'kit',
  'recover',
  'reset',
  'profile',
  'run',
  'schedule',
  'agent',
] as const;

export type ClientCommandName = (typeof CLIENT_COMMAND_NAMES)[number];

/** The command `argv` (process.argv) names: its first argument that is not an option. */
export const requestedCommand = (argv: readonly string[]): string | undefined => argv.slice(2).find((arg) => !arg.startsWith('-'));

export const isClientCommand = (name: string | undefined): boolean =>
  (CLIENT_COMMAND_NAMES as readonly (string | undefined)[]).includes(name);

/**
 * `--profile <name>`, which every client command but `profile` takes (./index.ts adds it). Here rather than in
 * ../command-frame.ts so that registering commands (and so `coffer serve`) does not load the client modules.
 */
export const PROFILE_OPTION = [
  '--profile <name>',
  'use this profile of the config file (else COFFER_PROFILE, else its "default"); set variables and flags win over it',
] as const;
