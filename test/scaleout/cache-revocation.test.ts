/**
 * The metadata cache across nodes: two real `coffer serve` processes on one PostgreSQL schema, each serving API key
 * lookups, accounts and lists from its own memory (their /metrics: cache hits, no database reads for repeats).
 * The nodes run with COFFER_METADATA_CACHE_TTL=1h, so an entry is never read again for its age while this file
 * runs (the first test proves it): every change below is seen only because the node heard it (NOTIFY), or because
 * it dropped its cache when its LISTEN connection broke.
 * - a key revoked through node A (console), by a `coffer admin` process (which has no status bus) and by SQL
 *   written by hand is refused by the other nodes;
 * - a bootstrap on node A, a plan change by `coffer admin` and one by hand are seen by node B;
 * - after node B's LISTEN connection is killed, B drops its cache and still refuses a key revoked meanwhile.
 * "Seen" is polled with a bound of 10 s against hangs, far below the TTL (and no timing is asserted).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyService } from '../../src/services/keys.js';
import { SessionService } from '../../src/services/sessions.js';
import { openPostgresStores } from '../../src/store/postgres.js';
import { api, envelope } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { createTestSchema, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { json, runCli } from '../client/helpers.js';

const METRICS_TOKEN = 'metrics-token-for-cache-test';

/** The node's count of database reads and of metadata cache hits (from /metrics). */
async function counters(node: ServeNode): Promise<{ reads: number; hits: number }> {
  const text = await (await fetch(`${node.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  return {
    reads: Number(/coffer_db_queries_total\{kind="read"\} (\d+)/.exec(text)![1]),
    hits: Number(/coffer_metadata_cache_lookups_total\{result="hit"\} (\d+)/.exec(text)![1]),
  };
}

/** Far longer than this file runs: entries are never read again for their age here. */
const TTL = '1h';
/** How long a change may take to be seen before the test fails: a bound against hangs, far below TTL. */
const BOUND_MS = 10_000;

/** Repeats `read` every 10 ms until `done`; whether it got there within BOUND_MS. */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<boolean> {
  const deadline = Date.now() + BOUND_MS;
  while (Date.now() < deadline) {
    if (done(await read())) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}

describe.skipIf(skipPg)('metadata cache on two Coffer nodes sharing one PostgreSQL', () => {
  let schema: TestSchema;
  let env: Record<string, string>;
  let a: ServeNode;
  let b: ServeNode;
  const nodes: ServeNode[] = [];
  const issued: { apiKey: string; keyId: string; accountId: string }[] = [];
  let accountB: { apiKey: string; keyId: string; accountId: string };
  let loginToken: string;
  /** ServeNode B's connections carry their own application_name, so the test can find B's LISTEN session (and only it). */
  const nodeBName = `coffer_test_b_${process.pid}_${Date.now()}`;

  beforeAll(async () => {
    requirePg();
    assertBuilt();
    schema = await createTestSchema('coffer_cache_nodes');
    env = { COFFER_DATABASE_URL: schema.url, COFFER_METRICS_TOKEN: METRICS_TOKEN, COFFER_METADATA_CACHE_TTL: TTL };
    // Accounts and keys exist before the nodes start (so neither runs the first-start bootstrap).
    const store = openPostgresStores(schema.url);
    try {
      await store.database.migrate();
      const clock = { now: () => Date.now() };
      const keys = new KeyService(store, clock);
      const account = await keys.createAccount('free');
      for (let i = 0; i < 6; i++) {
        const { apiKey, key } = await keys.issueKey(account);
        issued.push({ apiKey, keyId: key.id, accountId: account.id });
      }
      const other = await keys.createAccount('free');
      const { apiKey, key } = await keys.issueKey(other);
      accountB = { apiKey, keyId: key.id, accountId: other.id };
      loginToken = (await new SessionService(store, keys, clock).createLoginLink(account.id))!.token;
    } finally {
      await store.database.close();
    }
    const urlB = new URL(schema.url);
    urlB.searchParams.set('application_name', nodeBName);
    [a, b] = await Promise.all([startServeNode('a', env), startServeNode('b', { ...env, COFFER_DATABASE_URL: urlB.toString() })]);
    nodes.push(a, b);
  }, 40_000);

  afterAll(async () => {
    for (const node of nodes) if (/"level":(50|60)/.test(node.output())) console.warn(`node ${node.name} logged:\n${node.output()}`);
    for (const node of nodes) node.child.kill('SIGKILL');
    await Promise.all(nodes.map((node) => exited(node.child)));
    await schema?.drop();
  });

  /** GETs the account and the list a few times on `node`: the repeats are served from its cache. */
  async function warm(node: ServeNode, apiKey: string) {
    const call = api(node.url, apiKey);
    expect((await call('GET', '/api/backup-account')).status).toBe(200);
    expect((await call('GET', '/api/backups')).status).toBe(200);
    const before = await counters(node);
    for (let i = 0; i < 5; i++) {
      expect((await call('GET', '/api/backup-account')).status).toBe(200);
      expect((await call('GET', '/api/backups')).status).toBe(200);
    }
    // 25 lookups (key, account, vault; key, list), 25 database reads without the cache; at most one re-read per
    // entry if the notification of an earlier change to the account arrives meanwhile.
    const after = await counters(node);
    expect(after.hits - before.hits).toBeGreaterThanOrEqual(21);
    expect(after.reads - before.reads).toBeLessThanOrEqual(4);
  }

  /** Runs `sql` on the shared schema as an operator would, in psql. */
  async function byHand(sql: string, values: unknown[]) {
    const client = new pg.Client({ connectionString: schema.url });
    await client.connect();
    try {
      return await client.query(sql, values);
    } finally {
      await client.end();
    }
  }

  it('keeps entries past the default 1 s backstop: COFFER_METADATA_CACHE_TTL=1h is in effect', async () => {
    const owner = issued[5]!;
    await warm(b, owner.apiKey);
    // The one wait for time itself: past the default backstop, the entries are still served from memory.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // A scrape reads the database itself (the per-plan gauges): what one scrape reads is measured, not assumed.
    const scrape = (await counters(b)).reads;
    const before = await counters(b);
    const scrapeReads = before.reads - scrape;
    for (let i = 0; i < 3; i++) expect((await api(b.url, owner.apiKey)('GET', '/api/backup-account')).status).toBe(200);
    const after = await counters(b);
    // A scrape's own usage query runs while the gauges collect, so it lands in that scrape's read count or the
    // next one's: one either way. Three GETs missing the cache would read at least three times.
    expect(Math.abs(after.reads - before.reads - scrapeReads)).toBeLessThanOrEqual(1);
    expect(after.hits - before.hits).toBe(9);
  });

  it('a key revoked on node A (console) is refused by node B', async () => {
    const [owner, victim] = issued;
    await warm(a, victim!.apiKey);
    await warm(b, victim!.apiKey);
    const signIn = await fetch(`${a.url}/console/api/session`, {
      method: 'POST',
      headers: { origin: a.url, 'content-type': 'application/json' },
      body: JSON.stringify({ loginToken }),
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    const { csrfToken } = (await signIn.json()) as { csrfToken: string };

    const revoked = await fetch(`${a.url}/console/api/keys/${victim!.keyId}`, {
      method: 'DELETE',
      headers: { cookie, origin: a.url, 'x-csrf-token': csrfToken },
    });
    expect(revoked.status).toBe(200);
    // ServeNode A: at once. ServeNode B: as soon as the notification arrives.
    expect((await api(a.url, victim!.apiKey)('GET', '/api/backup-account')).status).toBe(401);
    expect(
      await eventually(
        () => api(b.url, victim!.apiKey)('GET', '/api/backup-account'),
        (r) => r.status === 401,
      ),
    ).toBe(true);
    // The other key of the account is untouched on both nodes.
    for (const node of [a, b]) expect((await api(node.url, owner!.apiKey)('GET', '/api/backup-account')).status).toBe(200);
  });

  it('a key revoked by a coffer admin process is refused by both nodes', async () => {
    const victim = issued[2]!;
    await warm(a, victim.apiKey);
    await warm(b, victim.apiKey);
    const result = json(await runCli(['admin', 'keys', 'revoke', victim.keyId, '--json'], env));
    expect(result).toEqual({ keyId: victim.keyId, revoked: true });
    for (const node of [a, b]) {
      expect(
        await eventually(
          () => api(node.url, victim.apiKey)('GET', '/api/backups'),
          (r) => r.status === 401,
        ),
        node.name,
      ).toBe(true);
    }
  });

  it('a key revoked and a plan changed by SQL written by hand are seen by both nodes', async () => {
    const victim = issued[4]!;
    const other = accountB;
    for (const node of [a, b]) {
      await warm(node, victim.apiKey);
      await warm(node, other.apiKey);
      expect((await api(node.url, other.apiKey)('GET', '/api/backup-account')).body).toMatchObject({ backupInterval: '1d' });
    }
    expect((await byHand('update api_keys set revoked_at = $1 where id = $2', [Date.now(), victim.keyId])).rowCount).toBe(1);
    expect((await byHand("update accounts set plan = 'pro' where id = $1", [other.accountId])).rowCount).toBe(1);
    for (const node of [a, b]) {
      expect(
        await eventually(
          () => api(node.url, victim.apiKey)('GET', '/api/backups'),
          (r) => r.status === 401,
        ),
        node.name,
      ).toBe(true);
      const onNode = api(node.url, other.apiKey);
      expect(
        await eventually(
          () => onNode('GET', '/api/backup-account'),
          (r) => r.body.backupInterval === '30m',
        ),
        node.name,
      ).toBe(true);
    }
  });

  it('a bootstrap on node A and a plan change by coffer admin are seen by node B', async () => {
    const owner = issued[0]!;
    await warm(b, owner.apiKey);
    const onB = api(b.url, owner.apiKey);
    expect((await onB('GET', '/api/backup-account')).body).toMatchObject({ initialized: false, backupInterval: '1d' });

    const bootstrapped = await api(a.url, owner.apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope(5) });
    expect(bootstrapped.status).toBe(200);
    expect(
      await eventually(
        () => onB('GET', '/api/backup-account'),
        (r) => r.body.initialized === true,
      ),
    ).toBe(true);

    json(await runCli(['admin', 'accounts', 'set-plan', owner.accountId, 'pro', '--json'], env));
    expect(
      await eventually(
        () => onB('GET', '/api/backup-account'),
        (r) => r.body.backupInterval === '30m',
      ),
    ).toBe(true);
  });

  it("after node B's LISTEN connection is killed, B still refuses a key revoked meanwhile", async () => {
    const victim = issued[3]!;
    await warm(b, victim.apiKey);
    const { rowCount } = await byHand(
      `select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1 and query like 'LISTEN %'`,
      [nodeBName],
    );
    expect(rowCount).toBe(1);
    await byHand('update api_keys set revoked_at = $1 where id = $2', [Date.now(), victim.keyId]);
    expect(
      await eventually(
        () => api(b.url, victim.apiKey)('GET', '/api/backups'),
        (r) => r.status === 401,
      ),
    ).toBe(true);
  });
});
