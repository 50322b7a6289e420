/**
 * The metadata cache across nodes: two real `coffer serve` processes on one PostgreSQL schema, each serving API key
 * lookups, accounts and lists from its own memory (their /metrics: cache hits, no database reads for repeats).
 * - a key revoked through node A (console) is refused by node B within 1 s, and one revoked by a `coffer admin`
 *   process (which has no status bus) is refused by both within 1 s;
 * - a bootstrap on node A and a plan change by `coffer admin` are seen by node B within 1 s;
 * - after node B's LISTEN connection is killed, B drops its cache and still refuses a key revoked meanwhile.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyService } from '../../src/services/keys.js';
import { SessionService } from '../../src/services/sessions.js';
import { openPostgresStore } from '../../src/store/postgres.js';
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

/** Repeats `read` every 10 ms until `done`; how long that took after `since` (ms), or Infinity after 3 s. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, since: number): Promise<number> {
  while (Date.now() - since < 3000) {
    if (done(await read())) return Date.now() - since;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Infinity;
}

describe.skipIf(skipPg)('metadata cache on two Coffer nodes sharing one PostgreSQL', () => {
  let schema: TestSchema;
  let env: Record<string, string>;
  let a: ServeNode;
  let b: ServeNode;
  const nodes: ServeNode[] = [];
  const issued: { apiKey: string; keyId: string; accountId: string }[] = [];
  let loginToken: string;
  /** ServeNode B's connections carry their own application_name, so the test can find B's LISTEN session (and only it). */
  const nodeBName = `coffer_test_b_${process.pid}_${Date.now()}`;

  beforeAll(async () => {
    requirePg();
    assertBuilt();
    schema = await createTestSchema('coffer_cache_nodes');
    env = { COFFER_DATABASE_URL: schema.url, COFFER_METRICS_TOKEN: METRICS_TOKEN };
    // Accounts and keys exist before the nodes start (so neither runs the first-start bootstrap).
    const store = openPostgresStore(schema.url);
    try {
      await store.migrate();
      const clock = { now: () => Date.now() };
      const keys = new KeyService(store, clock);
      const account = await keys.createAccount('free');
      for (let i = 0; i < 4; i++) {
        const { apiKey, key } = await keys.issueKey(account);
        issued.push({ apiKey, keyId: key.id, accountId: account.id });
      }
      loginToken = (await new SessionService(store, keys, clock).createLoginLink(account.id))!.token;
    } finally {
      await store.close();
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
    // entry if its 1 s backstop age ends meanwhile.
    const after = await counters(node);
    expect(after.hits - before.hits).toBeGreaterThanOrEqual(21);
    expect(after.reads - before.reads).toBeLessThanOrEqual(4);
  }

  it('a key revoked on node A (console) is refused by node B within 1 s', async () => {
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

    const revokedAt = Date.now();
    const revoked = await fetch(`${a.url}/console/api/keys/${victim!.keyId}`, {
      method: 'DELETE',
      headers: { cookie, origin: a.url, 'x-csrf-token': csrfToken },
    });
    expect(revoked.status).toBe(200);
    // ServeNode A: at once. ServeNode B: as soon as the notification arrives.
    expect((await api(a.url, victim!.apiKey)('GET', '/api/backup-account')).status).toBe(401);
    const onB = await until(() => api(b.url, victim!.apiKey)('GET', '/api/backup-account'), (r) => r.status === 401, revokedAt);
    console.info(`revoke on A → refused on B after ${onB} ms (including the revoke request)`);
    expect(onB).toBeLessThan(1000);
    // The other key of the account is untouched on both nodes.
    for (const node of [a, b]) expect((await api(node.url, owner!.apiKey)('GET', '/api/backup-account')).status).toBe(200);
  });

  it('a key revoked by a coffer admin process is refused by both nodes within 1 s', async () => {
    const victim = issued[2]!;
    await warm(a, victim.apiKey);
    await warm(b, victim.apiKey);
    const result = json(await runCli(['admin', 'keys', 'revoke', victim.keyId, '--json'], env));
    const revokedAt = Date.now();
    expect(result).toEqual({ keyId: victim.keyId, revoked: true });
    for (const node of [a, b]) {
      const took = await until(() => api(node.url, victim.apiKey)('GET', '/api/backups'), (r) => r.status === 401, revokedAt);
      expect(took).toBeLessThan(1000);
    }
  });

  it('a bootstrap on node A and a plan change by coffer admin are seen by node B within 1 s', async () => {
    const owner = issued[0]!;
    await warm(b, owner.apiKey);
    const onB = api(b.url, owner.apiKey);
    expect((await onB('GET', '/api/backup-account')).body).toMatchObject({ initialized: false, backupInterval: '1d' });

    const bootstrapped = await api(a.url, owner.apiKey)('POST', '/api/backup-account/bootstrap', { json: envelope(5) });
    expect(bootstrapped.status).toBe(200);
    const since = Date.now();
    expect(await until(() => onB('GET', '/api/backup-account'), (r) => r.body.initialized === true, since)).toBeLessThan(1000);

    json(await runCli(['admin', 'accounts', 'set-plan', owner.accountId, 'pro', '--json'], env));
    const planned = Date.now();
    expect(await until(() => onB('GET', '/api/backup-account'), (r) => r.body.backupInterval === '30m', planned)).toBeLessThan(1000);
  });

  it("after node B's LISTEN connection is killed, B still refuses a key revoked meanwhile", async () => {
    const victim = issued[3]!;
    await warm(b, victim.apiKey);
    const admin = new pg.Client({ connectionString: schema.url });
    await admin.connect();
    try {
      const { rowCount } = await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1 and query like 'LISTEN %'`,
        [nodeBName],
      );
      expect(rowCount).toBe(1);
      await admin.query('update api_keys set revoked_at = $1 where id = $2', [Date.now(), victim.keyId]);
    } finally {
      await admin.end();
    }
    const since = Date.now();
    expect(await until(() => api(b.url, victim.apiKey)('GET', '/api/backups'), (r) => r.status === 401, since)).toBeLessThan(1000);
  });
});
