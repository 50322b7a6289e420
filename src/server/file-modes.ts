import type { Config } from '../config.js';

/**
 * What the server and the operator commands create (the data directory, the SQLite database with its -wal and -shm,
 * blobs, temp files, snapshots) holds key hashes, sessions and metadata: owner-only, directories 0700 and files
 * 0600, whatever umask the process was started with (`npm start` from a shell: 022). With COFFER_ACCEL_REDIRECT,
 * nginx's user reads the blobs through the group (docs/deploy.md#downloads-served-by-nginx), so the group bits the
 * umask grants stay. A umask, not a chmod of each file: SQLite creates its files itself, and every later one follows.
 */
export function restrictFileModes(config: Pick<Config, 'accelRedirect'>): void {
  const started = process.umask(0o077); // setting is the one way to read it (reading alone is deprecated)
  process.umask(started | (config.accelRedirect === null ? 0o077 : 0o007));
}
