#!/usr/bin/env node
/**
 * `coffer` as shipped in the CLI package that every Coffer server serves at /downloads/coffer-cli.tgz: the client
 * commands only (encrypt locally, back up, restore), with none of the server's dependencies. `coffer serve` and
 * `coffer admin` belong to the full `coffer` package.
 */
import { Command } from 'commander';
import { VERSION } from '../lib/version.js';
import { registerCompletion } from './commands/completion.js';
import { registerClientCommands } from './commands/index.js';
import { registerVersion } from './commands/version.js';
import { run } from './run.js';

const program = new Command('coffer')
  .description('Coffer CLI: zero-knowledge encrypted backups (the client; the server is the full coffer package)')
  .version(VERSION)
  .exitOverride()
  .showHelpAfterError();
registerClientCommands(program);
registerVersion(program);
registerCompletion(program); // last: it completes the commands registered before it

await run(program);
