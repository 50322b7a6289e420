/**
 * A PostgreSQL store migrates while other schemas of the same database come and go (other tenants, other test files
 * running side by side). Kysely's own table listing read every schema by name and failed with "schema … does not
 * exist" when one was dropped meanwhile: with it, most of these migrations failed (27 of 40 in one run); the store's
 * dialect lists its own schema only (src/store/postgres.ts).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStores } from '../../src/store/postgres.js';
import { createTestSchema, PG_URL, requirePg, skipPg } from '../helpers/pg.js';

describe.skipIf(skipPg)('PostgreSQL store: migrating while other schemas are dropped', () => {
  const churnPrefix = `coffer_churn_${process.pid}_${randomBytes(3).toString('hex')}`;
  const churn = new pg.Client({ connectionString: PG_URL });

  beforeAll(async () => {
    requirePg();
    await churn.connect();
  });

  afterAll(async () => {
    const { rows } = await churn.query<{ nspname: string }>('select nspname from pg_namespace where nspname like $1', [`${churnPrefix}%`]);
    for (const { nspname } of rows) await churn.query(`drop schema if exists "${nspname}" cascade`);
    await churn.end();
  });

  it('every migration succeeds', async () => {
    let stop = false;
    const churning = (async () => {
      for (let i = 0; !stop; i++) {
        const name = `${churnPrefix}_${i}`;
        await churn.query(`create schema "${name}"; create table "${name}".t (a int)`);
        await churn.query(`drop schema "${name}" cascade`);
      }
    })();
    const failures: string[] = [];
    try {
      for (let run = 0; run < 20; run++) {
        const schema = await createTestSchema('coffer_churned');
        const store = openPostgresStores(schema.url, { maxConnections: 2 });
        try {
          await store.database.migrate();
        } catch (error) {
          failures.push(String((error as Error).cause ?? error));
        } finally {
          await store.database.close();
          await schema.drop();
        }
      }
    } finally {
      stop = true;
      await churning;
    }
    expect(failures).toEqual([]);
  });
});
