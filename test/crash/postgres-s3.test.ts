/**
 * Crash safety on the scale-out pair (PostgreSQL + S3 on loopback, on s3rver and on Ceph's RADOS Gateway): see
 * harness.ts for the loop and its invariants. On s3rver the harness ages orphans by moving s3rver's file times;
 * a real store's timestamps cannot be moved, so on Ceph the server runs with COFFER_ORPHAN_GRACE=0s instead
 * (every orphan is old enough at the start-up sweep, which runs before the round's workload). Each run gets its own database (dropped after), so amcheck can verify its indexes.
 * The server offers s3-presigned uploads: about half the uploads go straight to the store under presigned URLs
 * (single PUT, multipart, abandoned, or one byte short of what was signed), killed at any step of them.
 * Skipped when PostgreSQL is unreachable, unless COFFER_REQUIRE_PG=1 (then it fails).
 * COFFER_CRASH_ROUNDS (default 30) rounds.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStores } from '../../src/store/postgres.js';
import { PG_URL, requirePg, skipPg } from '../helpers/pg.js';
import { S3_ENGINES, skipEngine, type TestS3, startS3 } from '../helpers/s3.js';
import { tempDir } from '../helpers/tmp.js';
import { type Backend, CrashLoop, type Row, assertBuilt, issueProKeys } from './harness.js';

const ROUNDS = Number(process.env.COFFER_CRASH_ROUNDS ?? 30);

async function withClient<T>(url: string, task: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await task(client);
  } finally {
    await client.end();
  }
}

function postgresS3Backend(url: string, s3: TestS3, dataDir: string): Backend {
  const query = (sql: string) => withClient(url, async (client) => (await client.query(sql)).rows);
  const movable = s3.directory !== undefined;
  return {
    name: `postgres+s3 (${s3.engine})`,
    env: {
      ...s3.env,
      COFFER_DATABASE_URL: url,
      COFFER_DATA_DIR: dataDir,
      COFFER_S3_PRESIGNED: 'on',
      ...(movable ? {} : { COFFER_ORPHAN_GRACE: '0s' }),
    },
    presigned: true,
    async rows() {
      return (await query('select id, account_id, status, expires_at, blob_key, ciphertext_size_bytes from backups')).map((r): Row => ({
        id: r.id,
        accountId: r.account_id,
        status: r.status,
        expiresAt: Number(r.expires_at),
        blobKey: r.blob_key,
        size: r.ciphertext_size_bytes === null ? null : Number(r.ciphertext_size_bytes),
      }));
    },
    async vaults() {
      return new Map((await query('select account_id, wrapped_master_key from vaults')).map((r) => [r.account_id, r.wrapped_master_key]));
    },
    async blobs() {
      const out = new Map<string, number>();
      for await (const entry of s3.store().list('backups/')) out.set(entry.key, entry.size);
      return out;
    },
    async leftovers() {
      return (await s3.incompleteUploads()).map((id) => `incomplete multipart upload ${id}`);
    },
    async age(ms) {
      const directory = s3.directory;
      if (directory === undefined) return; // COFFER_ORPHAN_GRACE=0s (above)
      // A body s3rver received whole is still written after the killed server is gone: aged before it lands, its
      // file would be new, and the restart's sweep would rightly keep it (seen once in CI as "no live record").
      await s3.settled!(5_000);
      const then = new Date(Date.now() - ms);
      for (const entry of fs.readdirSync(directory, { recursive: true }) as string[]) {
        // s3rver may still be dropping what the killed server's last requests left.
        try {
          fs.utimesSync(path.join(directory, entry), then, then);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        }
      }
    },
    async integrity() {
      // B-tree structure of every index, and every heap tuple present in them (amcheck).
      try {
        await query(
          `select bt_index_check(index => c.oid, heapallindexed => true) from pg_index i
             join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = 'public'`,
        );
        return [];
      } catch (error) {
        return [`amcheck: ${(error as Error).message}`];
      }
    },
    createKeys: (n) => issueProKeys(openPostgresStores(url), n),
  };
}

for (const engine of S3_ENGINES)
  describe.skipIf(skipPg || skipEngine(engine))(`crash safety: PostgreSQL + S3 (${engine})`, () => {
    const database = `coffer_crash_${engine}_${process.pid}_${Date.now().toString(36)}`;
    const url = new URL(PG_URL);
    url.pathname = `/${database}`;
    let s3: TestS3 | undefined;
    let created = false;

    beforeAll(async () => {
      requirePg();
      await withClient(PG_URL, (client) => client.query(`create database "${database}"`));
      created = true;
      await withClient(url.toString(), (client) => client.query('create extension if not exists amcheck'));
      s3 = await startS3(engine);
    });

    afterAll(async () => {
      await s3?.close();
      if (created) await withClient(PG_URL, (client) => client.query(`drop database if exists "${database}" with (force)`));
    });

    it(`survives ${ROUNDS} SIGKILLs in the middle of a mixed workload`, async () => {
      assertBuilt();
      const started = Date.now();
      const loop = new CrashLoop(postgresS3Backend(url.toString(), s3!, tempDir('coffer-crash-pg-')), { rounds: ROUNDS, actors: 4 });
      await loop.run();
      const t = loop.tally;
      console.log(
        `crash loop postgres+s3 (${engine}): ${t.rounds} rounds, ${t.kills} SIGKILLs (${t.midUploadKills} timed mid-upload), ${t.requests} requests, acknowledged ${JSON.stringify(t.acknowledged)}, ` +
          `${t.inDoubt} in doubt at a kill, ${t.abortedUploads} uploads cut off, ${t.streams} event streams, ${t.contentChecks} READY contents verified, ` +
          `presigned ${JSON.stringify(t.presigned)}, ` +
          `found after the kills and repaired by the restart ${JSON.stringify(t.found)}, ` +
          `start-up median ${t.startMs.sort((a, b) => a - b)[t.startMs.length >> 1]} ms, ${((Date.now() - started) / 1000).toFixed(1)} s in all ` +
          `(phases ms ${JSON.stringify(t.phaseMs)}); nothing lost`,
      );
      expect(t.rounds).toBe(ROUNDS);
    }, 900_000);
  });
