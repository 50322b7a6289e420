/**
 * Crash safety on the embedded pair (SQLite + files): see harness.ts for the loop and its invariants.
 * COFFER_CRASH_ROUNDS (default 30) rounds of workload → SIGKILL → restart → sweep → checks.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SQLITE_FILE, openSqliteStores } from '../../src/store/sqlite.js';
import { openSqliteDatabase } from '../../src/store/sqlite-driver.js';
import { tempDir } from '../helpers/tmp.js';
import { type Backend, CrashLoop, type Row, assertBuilt, issueProKeys } from './harness.js';

const ROUNDS = Number(process.env.COFFER_CRASH_ROUNDS ?? 30);

function files(root: string): string[] {
  if (!fs.existsSync(root)) return [];
  return (fs.readdirSync(root, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name));
}

function sqliteBackend(dataDir: string): Backend {
  const query = async <T>(sql: string): Promise<T[]> => {
    const db = await openSqliteDatabase(path.join(dataDir, SQLITE_FILE), { readonly: true });
    try {
      return db.prepare(sql).all([]) as T[];
    } finally {
      db.close();
    }
  };
  return {
    name: 'sqlite+fs',
    env: { COFFER_DATA_DIR: dataDir },
    async rows() {
      return (await query<any>('select id, account_id, status, expires_at, blob_key, ciphertext_size_bytes from backups')).map(
        (r): Row => ({
          id: r.id,
          accountId: r.account_id,
          status: r.status,
          expiresAt: Number(r.expires_at),
          blobKey: r.blob_key,
          size: r.ciphertext_size_bytes === null ? null : Number(r.ciphertext_size_bytes),
        }),
      );
    },
    async vaults() {
      return new Map(
        (await query<any>('select account_id, wrapped_master_key from vaults')).map((r) => [r.account_id, r.wrapped_master_key]),
      );
    },
    async blobs() {
      const root = path.join(dataDir, 'blobs');
      return new Map(
        files(path.join(root, 'backups')).map((file) => [path.relative(root, file).split(path.sep).join('/'), fs.statSync(file).size]),
      );
    },
    async leftovers() {
      return [...files(path.join(dataDir, 'tmp')), ...files(path.join(dataDir, 'uploads'))];
    },
    age(ms) {
      const then = new Date(Date.now() - ms);
      for (const dir of ['blobs', 'tmp', 'uploads']) {
        const root = path.join(dataDir, dir);
        for (const entry of fs.existsSync(root) ? (fs.readdirSync(root, { recursive: true }) as string[]) : []) {
          fs.utimesSync(path.join(root, entry), then, then);
        }
      }
    },
    async integrity() {
      const problems: string[] = [];
      const checks = await query<{ integrity_check: string }>('pragma integrity_check');
      if (checks.map((c) => c.integrity_check).join() !== 'ok') problems.push(`integrity_check: ${JSON.stringify(checks)}`);
      const foreign = await query<unknown>('pragma foreign_key_check');
      if (foreign.length > 0) problems.push(`foreign_key_check: ${JSON.stringify(foreign)}`);
      return problems;
    },
    createKeys: async (n) => issueProKeys(await openSqliteStores(dataDir), n),
  };
}

describe('crash safety: SQLite + files', () => {
  it(`survives ${ROUNDS} SIGKILLs in the middle of a mixed workload`, async () => {
    assertBuilt();
    const started = Date.now();
    const loop = new CrashLoop(sqliteBackend(tempDir('coffer-crash-')), { rounds: ROUNDS, actors: 4 });
    await loop.run();
    const t = loop.tally;
    console.log(
      `crash loop sqlite+fs: ${t.rounds} rounds, ${t.kills} SIGKILLs (${t.midUploadKills} timed mid-upload), ${t.requests} requests, acknowledged ${JSON.stringify(t.acknowledged)}, ` +
        `${t.inDoubt} in doubt at a kill, ${t.abortedUploads} uploads cut off, ${t.streams} event streams, ${t.contentChecks} READY contents verified, ` +
        `found after the kills and repaired by the restart ${JSON.stringify(t.found)}, ` +
        `start-up median ${t.startMs.sort((a, b) => a - b)[t.startMs.length >> 1]} ms, ${((Date.now() - started) / 1000).toFixed(1)} s in all ` +
        `(phases ms ${JSON.stringify(t.phaseMs)}); nothing lost`,
    );
    expect(t.rounds).toBe(ROUNDS);
  }, 600_000);
});
