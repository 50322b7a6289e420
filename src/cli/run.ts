/** Runs a `coffer` program: parses argv and turns every failure into a message and an exit code (CONTRACT §10). */
import { type Command, CommanderError } from 'commander';
import { ConfigError } from '../config.js';
import { CliError, EXIT } from './output.js';

export async function run(program: Command): Promise<void> {
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
}
