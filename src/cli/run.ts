/** Runs a `coffer` program: parses argv, turns every failure into a message and an exit code (docs/client.md). */
import { type Command, CommanderError } from 'commander';
import { ConfigError } from '../config.js';
import { CliError, EXIT, writeHuman } from './output.js';

export async function run(program: Command): Promise<void> {
  try {
    await program.parseAsync(process.argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      const benign = ['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(error.code);
      process.exit(benign ? EXIT.ok : EXIT.usage);
    }
    if (error instanceof ConfigError) {
      writeHuman(process.stderr, `coffer: invalid configuration: ${error.message}`);
      process.exit(EXIT.failure);
    }
    if (error instanceof CliError) {
      writeHuman(process.stderr, `coffer: ${error.message}`);
      process.exit(error.exitCode);
    }
    writeHuman(process.stderr, `coffer: ${(error as Error).message}`);
    process.exit(EXIT.failure);
  }
}
