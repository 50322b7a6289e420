#!/usr/bin/env node
/** The one executable, `coffer` (CONTRACT §10). */
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config.js';
import { registerAdminCommands } from './admin.js';
import { registerClientCommands } from './client.js';
import { CliError, EXIT } from './output.js';
import { registerServeCommand } from './serve.js';

const program = new Command('coffer')
  .description('Coffer: zero-knowledge encrypted backups')
  .version('0.1.0')
  .exitOverride()
  .showHelpAfterError();
registerServeCommand(program);
registerAdminCommands(program);
registerClientCommands(program);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    const benign = ['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(error.code);
    process.exit(benign ? EXIT.ok : EXIT.usage);
  }
  if (error instanceof ConfigError) {
    process.stderr.write(`coffer: invalid configuration: ${error.message}\n`);
    process.exit(EXIT.failure);
  }
  if (error instanceof CliError) {
    process.stderr.write(`coffer: ${error.message}\n`);
    process.exit(error.exitCode);
  }
  process.stderr.write(`coffer: ${(error as Error).message}\n`);
  process.exit(EXIT.failure);
}
