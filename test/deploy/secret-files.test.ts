/**
 * Secrets from files (`X_FILE`, as container and systemd deployments pass them; docs/operations.md#secrets-from-files),
 * each through a real `coffer serve` process:
 * - COFFER_METRICS_TOKEN_FILE: /metrics answers the token from the file (its trailing newline dropped), and only it;
 * - COFFER_INITIAL_API_KEY_FILE: the first account's key is the one in the file, and it is never printed;
 * - COFFER_DATABASE_URL_FILE: the node keeps its metadata in that PostgreSQL schema (not in SQLite);
 * - COFFER_S3_SECRET_ACCESS_KEY_FILE: s3rver accepts the node's signed requests with the secret from the file (and
 *   refuses them with a wrong one in the file);
 * - X and X_FILE both set, or a file that cannot be read: the server does not start, says so in one line, and never
 *   prints the secret.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { assertBuilt } from '../helpers/built.js';
import { createTestSchema, PG_URL, requirePg, skipPg, type TestSchema } from '../helpers/pg.js';
import { startS3, type TestS3 } from '../helpers/s3.js';
import { exited, startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { tempDir } from '../helpers/tmp.js';

const BIN = path.resolve('dist/cli/main.js');
const nodes: ServeNode[] = [];
const secrets = tempDir('coffer-secret-files-');

/** A secret file as a deployment writes it: mode 0600, ending in a newline. */
function secretFile(name: string, content: string): string {
  const file = path.join(secrets, name);
  fs.writeFileSync(file, `${content}\n`, { mode: 0o600 });
  return file;
}

async function node(name: string, env: Record<string, string>): Promise<ServeNode> {
  const started = await startServeNode(name, env);
  nodes.push(started);
  return started;
}

beforeAll(() => assertBuilt());

afterAll(async () => {
  for (const started of nodes) started.child.kill('SIGKILL');
  await Promise.all(nodes.map((started) => exited(started.child)));
});

describe('secret settings read from files by coffer serve', () => {
  it('COFFER_METRICS_TOKEN_FILE: /metrics takes the token in the file, and no other', async () => {
    const token = 'metrics-token-from-a-secret-file';
    const server = await node('metrics', { COFFER_METRICS_TOKEN_FILE: secretFile('metrics-token', token) });
    const metrics = (bearer: string) => api(server.url, bearer)('GET', '/metrics');
    const accepted = await metrics(token);
    expect(accepted.status).toBe(200);
    expect(accepted.text).toContain('coffer_');
    expect((await metrics(`${token}x`)).status).toBe(401);
    expect((await metrics('metrics-token-from-a-secret-fil')).status).toBe(401);
  });

  it('COFFER_INITIAL_API_KEY_FILE: the first account gets the key in the file, never printed', async () => {
    const key = `cfk_${'K'.repeat(20)}${'k'.repeat(23)}`;
    const server = await node('initial-key', { COFFER_INITIAL_API_KEY_FILE: secretFile('initial-key', key) });
    expect(server.output()).toContain('First start: created account');
    expect(server.output()).not.toContain(key);
    expect((await api(server.url, key)('GET', '/api/backups')).status).toBe(200);
    expect((await api(server.url, `cfk_${'Z'.repeat(43)}`)('GET', '/api/backups')).status).toBe(401);
  });
});

describe.skipIf(skipPg)('COFFER_DATABASE_URL_FILE', () => {
  let schema: TestSchema;

  beforeAll(async () => {
    requirePg();
    schema = await createTestSchema('coffer_secret_file');
  });

  afterAll(async () => {
    await schema?.drop();
  });

  it('the node keeps its metadata in the PostgreSQL database the file names', async () => {
    const dataDir = tempDir('coffer-secret-db-');
    const server = await node('database', { COFFER_DATABASE_URL_FILE: secretFile('database-url', schema.url), COFFER_DATA_DIR: dataDir });
    expect(server.output()).not.toContain(schema.url);
    const ready = await api(server.url)('GET', '/readyz');
    expect(ready.status).toBe(200);
    // The first start made its account in that schema, and nothing went to SQLite.
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      const { rows } = await client.query(`select count(*)::int as n from "${schema.schema}".accounts`);
      expect(rows[0].n).toBe(1);
    } finally {
      await client.end();
    }
    expect(fs.readdirSync(dataDir).filter((name) => name.includes('sqlite'))).toEqual([]);
  });
});

describe('COFFER_S3_SECRET_ACCESS_KEY_FILE', () => {
  let s3: TestS3;

  beforeAll(async () => {
    // s3rver checks each request's signature here (it accepts any by itself).
    s3 = await startS3('s3rver', undefined, { checkSignatures: true });
  });

  afterAll(async () => {
    await s3?.close();
  });

  /** The S3 environment with the secret taken from a file instead. */
  function s3Env(secret: string, name: string): Record<string, string> {
    const { COFFER_S3_SECRET_ACCESS_KEY: _inline, ...rest } = s3.env;
    return { ...rest, COFFER_S3_SECRET_ACCESS_KEY_FILE: secretFile(name, secret) };
  }

  it('s3rver accepts the requests signed with the secret in the file (and refuses a wrong one)', { timeout: 90_000 }, async () => {
    const key = `cfk_${'S'.repeat(43)}`;
    const good = await node('s3-good', { ...s3Env(s3.options.secretAccessKey!, 's3-secret'), COFFER_INITIAL_API_KEY: key });
    const ready = await api(good.url)('GET', '/readyz');
    expect(ready.body).toEqual({ status: 'ready', checks: { database: 'ok', blobs: 'ok' } });
    // An archive goes in and comes back out through the signed S3 calls.
    const call = api(good.url, key);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const created = await call('POST', '/api/backups');
    expect(created.status).toBe(201);
    const id = (created.body as { backupId: string }).backupId;
    const data = randomBytes(64 * 1024);
    const uploaded = await call('POST', `/api/backups/upload?backupId=${id}`, {
      body: data,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(uploaded.status).toBe(201);
    expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
    expect((await call('GET', `/api/backups/${id}/content`)).raw.equals(data)).toBe(true);

    const wrong = await node('s3-wrong', s3Env('not-the-secret', 's3-wrong-secret'));
    const refused = await api(wrong.url)('GET', '/readyz');
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ status: 'unavailable', checks: { database: 'ok' } });
    expect((refused.body as { checks: { blobs: string } }).checks.blobs).not.toBe('ok');
  });
});

describe('a secret set twice, or a file that cannot be read, stops coffer serve', () => {
  function serve(env: Record<string, string>) {
    return spawnSync(process.execPath, [BIN, 'serve'], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', COFFER_DATA_DIR: tempDir('coffer-secret-bad-'), ...env },
      encoding: 'utf8',
      timeout: 20_000,
    });
  }

  it('one line naming the variable, no stack trace, never the secret', () => {
    const secretText = 'postgres://coffer:hunter2-do-not-print@127.0.0.1:1/coffer';
    const missing = path.join(secrets, 'missing');
    const unreadable = secretFile('unreadable', secretText);
    fs.chmodSync(unreadable, 0o000);
    const cases: [Record<string, string>, string][] = [
      [
        { COFFER_DATABASE_URL: secretText, COFFER_DATABASE_URL_FILE: secretFile('db-both', secretText) },
        'COFFER_DATABASE_URL_FILE: set either COFFER_DATABASE_URL or COFFER_DATABASE_URL_FILE, not both',
      ],
      [{ COFFER_S3_SECRET_ACCESS_KEY_FILE: missing }, `COFFER_S3_SECRET_ACCESS_KEY_FILE: cannot read the file "${missing}": no such file`],
    ];
    if (process.getuid?.() !== 0) {
      cases.push([
        { COFFER_DATABASE_URL_FILE: unreadable },
        `COFFER_DATABASE_URL_FILE: cannot read the file "${unreadable}": permission denied`,
      ]);
    }
    for (const [env, message] of cases) {
      const result = serve(env);
      expect(result.status, JSON.stringify(env)).toBe(1);
      expect(result.stderr).toBe(`coffer: invalid configuration: ${message}\n`);
      expect(result.stdout).toBe('');
      expect(result.stderr).not.toContain('hunter2');
    }
  });

  it('a malformed COFFER_DATABASE_URL (or its file) is named, never printed, and the server does not start', () => {
    const problem = 'not a valid postgres:// URL (percent-encode the characters # / ? @ : of a user name or password;';
    const malformed = [
      'postgres://coffer:hunter2#do-not-print@127.0.0.1/coffer', // a '#' in the password ends the authority
      'postgres://coffer:hunter2@127.0.0.1:99999/coffer', // no such port
      'postgres://coffer:hunter2@[::1/coffer', // an unclosed IPv6 bracket
    ];
    for (const url of malformed) {
      for (const [env, variable] of [
        [{ COFFER_DATABASE_URL: url }, 'COFFER_DATABASE_URL'],
        [{ COFFER_DATABASE_URL_FILE: secretFile('db-malformed', url) }, 'COFFER_DATABASE_URL_FILE'],
      ] as const) {
        const result = serve(env);
        expect(result.status, url).toBe(1);
        expect(result.stderr.startsWith(`coffer: invalid configuration: ${variable}: ${problem}`), result.stderr).toBe(true);
        expect(result.stderr.split('\n'), url).toHaveLength(2); // one line, no stack trace
        expect(result.stdout).toBe('');
        expect(result.stderr).not.toContain('hunter2');
      }
    }
  });
});
