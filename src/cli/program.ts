/** The `coffer` program: its commands, run on argv (the entry, main.ts, checks the Node version first). */
import { Command } from 'commander';
import { VERSION } from '../lib/version.js';
import { registerAdminCommands } from './admin.js';
import { registerCompletion } from './commands/completion.js';
import { registerClientCommands } from './commands/index.js';
import { registerVersion } from './commands/version.js';
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
registerVersion(program);
registerCompletion(program); // last: it completes the commands registered before it

await run(program);
