/**
 * PostgreSQL for tests: COFFER_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), one fresh
 * schema per run so concurrent runs never collide. When PostgreSQL is unreachable the suites are skipped,
 * unless the run requires `postgres` (test/helpers/required.ts; .ci/run does): then they fail.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { lacking, required } from './required.js';

export const PG_URL = process.env.COFFER_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REQUIRE_PG = required('postgres');

/** null when PostgreSQL answers (three tries), else why not. */
export async function pgProblem(): Promise<string | null> {
  let reason = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 5000 });
    try {
      await client.connect();
      await client.query('select 1');
      return null;
    } catch (error) {
      reason = (error as Error).message;
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  return `PostgreSQL at ${PG_URL} is unreachable: ${reason}`;
}

const problem = await pgProblem();
if (problem !== null && !REQUIRE_PG) console.warn(problem);

/** Whether PostgreSQL suites should be skipped (unreachable and not required). */
export const skipPg = lacking(problem === null, 'postgres');

/** Call in beforeAll of a PostgreSQL suite: fails the suite when PostgreSQL is required but unreachable. */
export function requirePg(): void {
  if (problem !== null) throw new Error(`${problem} (the run requires postgres: this must not be skipped)`);
}

export interface TestSchema {
  schema: string;
  /** PG_URL with search_path set to the schema, usable as COFFER_DATABASE_URL by any process. */
  url: string;
  drop(): Promise<void>;
}

export async function createTestSchema(prefix = 'coffer_test'): Promise<TestSchema> {
  const schema = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`create schema "${schema}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(PG_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    schema,
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        await client.query(`drop schema if exists "${schema}" cascade`);
      } finally {
        await client.end();
      }
    },
  };
}
