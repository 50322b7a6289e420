/** The `coffer` program: its commands, run on argv (the entry, main.ts, checks the Node version first). */
import { Command } from 'commander';
import { VERSION } from '../lib/version.js';
import { CLIENT_COMMANDS, registerCommands, VERSION_COMMAND } from './commands/index.js';
import { run } from './run.js';

const program = new Command('coffer').description('Coffer: zero-knowledge encrypted backups').version(VERSION).exitOverride();
await registerCommands(
  program,
  [
    { name: 'serve', load: async () => (await import('./serve.js')).registerServeCommand },
    { name: 'admin', load: async () => (await import('./admin/index.js')).registerAdminCommands },
    ...CLIENT_COMMANDS,
    VERSION_COMMAND,
  ],
  process.argv,
  // last: it completes the commands registered before it
  async (all) => (await import('./commands/completion.js')).registerCompletion(all),
);

await run(program);
