import type { Config } from '../config.js';
import type { Stores } from './ports/stores.js';
import { openSqliteStores } from './sqlite.js';

/** PostgreSQL when COFFER_DATABASE_URL is set, else SQLite in the data directory; migrated either way. */
export async function openStores(config: Config): Promise<Stores> {
  // The scale-out backends load only when configured: the embedded default (and the CLI) start faster.
  const stores =
    config.databaseUrl !== null
      ? (await import('./postgres.js')).openPostgresStores(config.databaseUrl)
      : await openSqliteStores(config.dataDir, config.sqliteDriver);
  try {
    await stores.database.migrate();
  } catch (error) {
    await stores.database.close().catch(() => undefined);
    throw error;
  }
  return stores;
}
