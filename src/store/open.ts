import type { Config } from '../config.js';
import { openSqliteStore } from './sqlite.js';
import type { Store } from './store.js';

/** PostgreSQL when COFFER_DATABASE_URL is set, else SQLite in the data directory; migrated either way. */
export async function openStore(config: Config): Promise<Store> {
  // The scale-out backends load only when configured: the embedded default (and the CLI) start faster.
  const store =
    config.databaseUrl !== null
      ? (await import('./postgres.js')).openPostgresStore(config.databaseUrl)
      : await openSqliteStore(config.dataDir, config.sqliteDriver);
  try {
    await store.migrate();
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
  return store;
}
