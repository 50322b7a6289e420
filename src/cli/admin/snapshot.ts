/** `coffer admin snapshot <file>`: a consistent copy of the embedded SQLite database while the server runs. */
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { CliError, emit } from '../output.js';

export function registerSnapshotCommand(admin: Command): void {
  admin
    .command('snapshot <file>')
    .description('write a consistent copy of the SQLite database to <file> while the server runs')
    .option('--json', 'print JSON')
    .action(async (file: string, opts: { json?: boolean }) => {
      const config = loadConfig();
      if (config.databaseUrl !== null) {
        throw new CliError('snapshot copies the embedded SQLite database; for PostgreSQL use pg_dump');
      }
      const target = path.resolve(file);
      if (fs.existsSync(target)) throw new CliError(`${target} already exists; choose a new file`);
      const [{ snapshotSqlite }, { restrictFileModes }] = await Promise.all([
        import('../../store/sqlite.js'),
        import('../../server/file-modes.js'),
      ]);
      restrictFileModes(config);
      const { pages } = await snapshotSqlite(config.dataDir, target, config.sqliteDriver);
      const { size } = fs.statSync(target);
      emit(!!opts.json, { file: target, bytes: size, pages }, () => `snapshot written to ${target} (${size} bytes)`);
    });
}
