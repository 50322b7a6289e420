/** `coffer version`: the same as `coffer --version`, for those who type it as a command. */
import type { Command } from 'commander';
import { VERSION } from '../../lib/version.js';
import { print } from '../output.js';

export function registerVersion(program: Command): void {
  program
    .command('version')
    .description('print the version of coffer')
    .action(() => print(VERSION));
}
