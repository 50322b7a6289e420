#!/usr/bin/env node
/**
 * `coffer` as shipped in the CLI package that every Coffer server serves at /downloads/coffer-cli.tgz: the client
 * commands only (encrypt locally, back up, restore), with none of the server's dependencies. `coffer serve` and
 * `coffer admin` belong to the full `coffer` package.
 */
// First: the V8 settings of a client command, before anything that compiles (wasm-tiering.ts).
import './wasm-tiering.js';
import { Command } from 'commander';
import { VERSION } from '../lib/version.js';
import { CLIENT_COMMANDS, registerCommands, VERSION_COMMAND } from './commands/index.js';
import { run } from './run.js';

const program = new Command('coffer')
  .description('Coffer CLI: zero-knowledge encrypted backups (the client; the server is the full coffer package)')
  .version(VERSION)
  .exitOverride();
// Completion last: it completes the commands registered before it.
await registerCommands(program, [...CLIENT_COMMANDS, VERSION_COMMAND], process.argv, async (all) =>
  (await import('./commands/completion.js')).registerCompletion(all),
);

await run(program);
