/** The `coffer` program: its commands, run on argv (the entry, main.ts, checks the Node version first). */
import { Command } from 'commander';
import { VERSION } from '../domain/version.js';
import { registerAdminCommands } from './admin.js';
import { registerClientCommands } from './client.js';
import { run } from './run.js';
import { registerServeCommand } from './serve.js';

const program = new Command('coffer')
  .description('Coffer: zero-knowledge encrypted backups')
  .version(VERSION)
  .exitOverride()
  .showHelpAfterError();
registerServeCommand(program);
registerAdminCommands(program);
registerClientCommands(program);

await run(program);
