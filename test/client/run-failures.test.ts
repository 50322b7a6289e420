/**
 * `coffer run` tells someone when it fails before it could even decide whether a backup is due, through the real
 * CLI: with the server unreachable, a revoked key (401) and a server answering 500, the on-failure hook runs, the
 * failure notification is sent, the run state is written (so the overdue notification can fire later), and the exit
 * code says failure. A server that answers the slot with an absurd Retry-After does not crash the run, and no hook
 * runs: the slot is asked for before `before`.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveRecipient, newKey } from '../../src/client/envelope.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, makeTree, runCli } from './helpers.js';

/** A loopback HTTP server answering every request with `answer` and recording the paths it was asked. */
async function fixedServer(answer: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    paths.push(`${req.method} ${req.url}`);
    req.resume().on('end', () => answer(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, paths, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('coffer run: failures before the "is a backup due?" decision are reported', () => {
  let server: TestServer;
  let receiver: Awaited<ReturnType<typeof fixedServer>>;
  let failing: Awaited<ReturnType<typeof fixedServer>>;
  let hostile: Awaited<ReturnType<typeof fixedServer>>;
  let work: string;
  let source: string;
  let closedUrl: string;

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    receiver = await fixedServer((_req, res) => res.writeHead(200).end('ok'));
    failing = await fixedServer((_req, res) =>
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'internal_error', message: 'boom' })),
    );
    // Reads are allowed (a clock that says a backup is due); the slot is refused with a Retry-After no Date can hold.
    hostile = await fixedServer((req, res) => {
      if (req.method === 'GET' && req.url === '/api/backup-account') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            initialized: true,
            backupInterval: '1d',
            cryptoVersion: 'v1',
            kdf: null,
            wrappedMasterKey: null,
            wrappedMasterKeyNonce: null,
          }),
        );
      } else if (req.method === 'GET' && req.url?.startsWith('/api/backups')) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ backups: [] }));
      } else {
        res
          .writeHead(429, { 'content-type': 'application/json', 'retry-after': '99999999999999' })
          .end(JSON.stringify({ code: 'backup_cadence_exceeded', message: 'not yet', details: { nextAllowedAt: 'never' } }));
      }
    });
    const closed = await fixedServer(() => undefined);
    closedUrl = closed.url;
    await closed.close();
    work = tempDir('coffer-run-failures-');
    source = path.join(work, 'source');
    await makeTree(source);
  });
  afterAll(async () => {
    await receiver?.close();
    await failing?.close();
    await hostile?.close();
    await server?.stop();
  });

  /** A profile named `name` on `url` with `key`, hooks that append to a log, failure notifications to the receiver. */
  async function profile(name: string, url: string, key: string, extra: string[] = []) {
    const dir = path.join(work, name);
    const env = { XDG_CONFIG_HOME: path.join(dir, 'config'), XDG_STATE_HOME: path.join(dir, 'state') };
    const log = path.join(dir, 'hooks.log');
    const keyFile = path.join(dir, 'key');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
    const hook = (what: string) => `echo "${what} $COFFER_OUTCOME" >> ${log}`;
    const added = await runCli(
      [
        'profile',
        'add',
        name,
        '--url',
        url,
        '--api-key-file',
        keyFile,
        '--path',
        source,
        '--recipient',
        recipient,
        '--before',
        hook('before'),
        '--after',
        hook('after'),
        '--on-failure',
        hook('on-failure'),
        '--notify-failure',
        `${receiver.url}/failure/${name}`,
        ...extra,
      ],
      env,
    );
    expect(added.code, added.stderr).toBe(0);
    return {
      run: () => runCli(['run'], env),
      hooks: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : []),
      state: () => JSON.parse(fs.readFileSync(path.join(dir, 'state/coffer/runs', `${name}.json`), 'utf8')) as { lastOutcome: string },
      notified: () => receiver.paths.filter((p) => p === `POST /failure/${name}`).length,
    };
  }

  // A vault's recipient (nothing is sealed in these runs, but a profile takes only a valid one).
  const recipient = deriveRecipient(newKey()).text;

  it.each([
    ['unreachable', () => closedUrl, async () => 'cfk_' + 'a'.repeat(43)],
    [
      'revoked',
      () => server.url,
      async () => {
        const { apiKey, keyId } = await server.newKey({ plan: 'pro' });
        await server.parts.keys.revoke(keyId);
        return apiKey;
      },
    ],
    ['answering-500', () => failing.url, async () => 'cfk_' + 'b'.repeat(43)],
  ] as const)('%s: on-failure hook, failure notification, run state, exit 1', async (name, url, key) => {
    const p = await profile(name, url(), await key());
    const result = await p.run();
    expect(result.code).toBe(1);
    expect(p.hooks()).toEqual(['on-failure failure']);
    expect(p.notified()).toBe(1);
    expect(p.state().lastOutcome).toBe('failure');
  });

  it('an absurd Retry-After on the slot: no crash, no hook runs (the server refused first), the run is reported as not due', async () => {
    const p = await profile('hostile', hostile.url, 'cfk_' + 'c'.repeat(43));
    const result = await p.run();
    expect(result.stderr).not.toMatch(/Invalid time value/);
    expect(result.code, result.stderr).toBe(0);
    expect(p.hooks()).toEqual([]);
    expect(p.state().lastOutcome).toBe('skipped');
  });
});
