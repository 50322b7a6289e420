/**
 * The backup agent through the real CLI and a real server on loopback (docs/client.md#the-backup-agent): profiles
 * in the config file (validation errors naming the field), `coffer run` (a backup when due; when not due exit 0 and
 * no slot opened, checked in the server's store; a 429 read as "not due"), hooks (outcome in their environment, no
 * keys, a timeout), notifications to a local HTTP receiver (healthchecks-style pings and JSON summaries, with no
 * secret and no file name in them), the overdue notification, and `coffer schedule` (units that pass
 * `systemd-analyze verify`, a crontab line, status, remove).
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKUP_STATUSES } from '../../src/domain/backups.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, CANARY_NAME, cliFor, json, makeTree, runCli, startCli } from './helpers.js';
import { lacking } from '../helpers/required.js';

const PASSPHRASE = 'agent-test passphrase';
/** Tests that spawn a dozen CLI processes or more: a bound against hangs on a loaded machine, not a timing check. */
const MANY_CLIS = 120_000;
const ANALYZE = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((file) => fs.existsSync(file));

interface Received {
  method: string;
  path: string;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** A loopback HTTP receiver that records every request (the notification targets). */
async function receiver() {
  const requests: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => (body += d));
    req.on('end', () => {
      requests.push({ method: req.method!, path: req.url!, body, headers: req.headers });
      res.writeHead(req.url === '/broken' ? 500 : 200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, requests, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('the backup agent: profiles, coffer run, hooks, notifications, schedule', () => {
  let server: TestServer;
  let lagging: TestServer;
  let hooks: Awaited<ReturnType<typeof receiver>>;
  let work: string;
  let source: string;
  let env: Record<string, string>;
  let apiKey: string;
  let accountId: string;

  /** The CLI with this test's config and state directories and nothing else: the profile supplies the rest. */
  const coffer = (args: string[], more: Record<string, string> = {}) => runCli(args, { ...env, ...more });

  async function addProfile(name: string, url: string, key: string, extra: string[] = []) {
    const keyFile = path.join(work, `${name}.key`);
    fs.writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
    const result = await coffer(['profile', 'add', name, '--url', url, '--api-key-file', keyFile, ...extra]);
    expect(result.code, result.stderr).toBe(0);
  }

  /** Every record of the account, in any state (a slot opened by mistake would show here). */
  const records = (id = accountId, on = server) => on.parts.stores.backups.listBackups(id, BACKUP_STATUSES);

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    // A server whose clock is two days behind: the client thinks a backup is due, the server answers 429.
    lagging = await startTestServer({ clock: new ManualClock(Date.now() - 2 * 86_400_000) });
    hooks = await receiver();
    work = tempDir('coffer-agent-');
    source = path.join(work, 'source');
    await makeTree(source);
    env = {
      XDG_CONFIG_HOME: path.join(work, 'config'),
      XDG_STATE_HOME: path.join(work, 'state'),
      COFFER_PASSPHRASE: PASSPHRASE,
      COFFER_KDF: 'min',
    };
    ({ apiKey, accountId } = await server.newKey({ plan: 'free' }));
    const owner = cliFor(server.url, apiKey, PASSPHRASE);
    expect((await owner(['init'])).code).toBe(0);
  });
  afterAll(async () => {
    await hooks?.close();
    await server?.stop();
    await lagging?.stop();
  });

  it(
    'profile add refuses what does not validate, naming the field; so does every command reading a bad file',
    async () => {
      const bad = async (args: string[], message: string) => {
        const result = await coffer(['profile', 'add', 'bad', ...args]);
        expect(result.code, result.stdout).toBe(2);
        expect(result.stderr).toContain(message);
      };
      const keyFile = path.join(work, 'some.key');
      fs.writeFileSync(keyFile, 'cfk_x\n', { mode: 0o600 });
      const ok = ['--url', server.url, '--api-key-file', keyFile, '--path', source];
      await bad(['--url', 'ftp://example.com', '--api-key-file', keyFile, '--path', source], 'profiles.bad.url: expected an http(s) URL');
      await bad([...ok, '--notify-failure', 'not a url'], 'profiles.bad.notify.failure[0]: expected an http(s) URL');
      await bad([...ok, '--hook-timeout', '0'], 'profiles.bad.hooks.timeoutSeconds');
      await bad(['--url', server.url, '--api-key-file', keyFile], 'profiles.bad.paths: expected at least one path');
      await bad(['--url', server.url, '--path', source], 'give exactly one of --api-key-file, --api-key-command, --api-key-stdin');
      await bad(
        [...ok, '--recipient', 'coffer1bogus'],
        '--recipient: the recipient string is damaged: its Bech32m checksum does not match',
      );
      expect(fs.existsSync(path.join(work, 'config/coffer/config.json'))).toBe(false); // nothing was written

      // A hand-edited file: errors name the field, an inline key is refused, and every command says so (exit 2).
      const file = path.join(work, 'config/coffer/config.json');
      fs.mkdirSync(path.dirname(file), { recursive: true });
      const write = (value: unknown) => fs.writeFileSync(file, JSON.stringify(value));
      write({ version: 1, profiles: { p: { url: server.url, apiKey: apiKey, paths: [source] } } });
      let result = await coffer(['list', '--profile', 'p']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('profiles.p.apiKey: expected {"file": "<path>"} or {"command": "<shell command>"}');
      expect(result.stderr).not.toContain(apiKey);
      write({ version: 1, profiles: { p: { url: server.url, apiKey: { file: keyFile }, paths: [source], hookz: {} } } });
      result = await coffer(['profile', 'list']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('profiles.p.hookz: unknown field');
      write({ version: 1, default: 'q', profiles: {} });
      result = await coffer(['list']);
      expect(result.stderr).toContain('default: no profile is named "q"');
      fs.rmSync(file);
    },
    MANY_CLIS,
  );

  it(
    'profile add (key from stdin, a file or a command), list, show and remove; the profile reaches the server',
    async () => {
      const file = path.join(work, 'config/coffer/config.json');
      let result;
      // add with the key on stdin (kept in its own 0600 file), list, show (never the key), the key command, remove
      result = await runCli(['profile', 'add', 'stdin', '--url', server.url, '--api-key-stdin', '--path', source], env, {
        input: `${apiKey}\n`,
      });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toContain('append-only API key');
      const stored = path.join(work, 'config/coffer/keys/stdin.key');
      expect(fs.statSync(stored).mode & 0o777).toBe(0o600);
      expect(fs.readFileSync(file, 'utf8')).not.toContain(apiKey);
      await addProfile('cmd', server.url, 'unused', ['--path', source]);
      result = await coffer([
        'profile',
        'add',
        'cmd',
        '--force',
        '--url',
        server.url,
        '--api-key-command',
        `cat ${stored}`,
        '--path',
        source,
      ]);
      expect(result.code, result.stderr).toBe(0);
      const listed = json(await coffer(['profile', 'list', '--json']));
      expect(listed.default).toBe('stdin');
      expect(Object.keys(listed.profiles)).toEqual(['stdin', 'cmd']);
      const shown = await coffer(['profile', 'show', 'stdin']);
      expect(shown.stdout).toContain(`api key:     file ${stored}`);
      expect(shown.stdout).not.toContain(apiKey);
      // The profiles reach the server: the default one, and one named with --profile (its key from the command).
      expect(json(await coffer(['list', '--json'])).backups).toEqual([]);
      expect(json(await coffer(['list', '--json', '--profile', 'cmd'])).backups).toEqual([]);
      expect(json(await coffer(['list', '--json'], { COFFER_PROFILE: 'cmd' })).backups).toEqual([]);
      // A variable that contradicts the named profile stops the command (docs/client.md#profiles, "No mixing").
      result = await coffer(['list', '--profile', 'cmd'], { COFFER_URL: 'http://127.0.0.1:9' });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('COFFER_URL names http://127.0.0.1:9, but profile cmd is in use and has its own');
      result = await coffer(['list', '--profile', 'nope']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('no profile named "nope"');
      for (const name of ['stdin', 'cmd']) expect((await coffer(['profile', 'remove', name])).code).toBe(0);
      expect(fs.existsSync(stored)).toBe(false);
      expect(json(await coffer(['profile', 'list', '--json'])).profiles).toEqual({});
    },
    MANY_CLIS,
  );

  it('run: backs up when due with hooks and notifications; not due: exit 0, no slot opened, no hook', async () => {
    const log = path.join(work, 'hooks.log');
    const record = (name: string) =>
      `echo "${name} $COFFER_HOOK $COFFER_OUTCOME $COFFER_BACKUP_ID key=$COFFER_API_KEY pass=$COFFER_PASSPHRASE" >> ${log}`;
    await addProfile('home', server.url, apiKey, [
      '--path',
      source,
      '--before',
      record('before'),
      '--after',
      record('after'),
      '--on-failure',
      record('failure'),
      '--healthchecks',
      `${hooks.url}/ping/home-uuid`,
      '--notify-success',
      `${hooks.url}/success`,
      '--notify-success',
      `${hooks.url}/broken`,
      '--notify-failure',
      `${hooks.url}/failure`,
    ]);
    hooks.requests.length = 0;
    const first = await coffer(['run', '--profile', 'home', '--json']);
    expect(first.code, first.stderr).toBe(0);
    const outcome = JSON.parse(first.stdout);
    expect(outcome).toMatchObject({ outcome: 'success', profile: 'home', interval: '1d' });
    expect((await records()).map((b) => [b.id, b.status])).toEqual([[outcome.backupId, 'READY']]);
    expect(Date.parse(outcome.nextDueAt)).toBeGreaterThan(Date.now() + 23 * 3_600_000);

    // hooks: before then after, told the outcome and the backup, never the key or the passphrase
    expect(fs.readFileSync(log, 'utf8')).toBe(`before before pending  key= pass=\nafter after success ${outcome.backupId} key= pass=\n`);
    // notifications: the healthchecks start and success pings, the success summaries (one target answers 500: a warning)
    expect(hooks.requests.map((r) => `${r.method} ${r.path}`).sort()).toEqual(
      ['POST /broken', 'POST /ping/home-uuid', 'POST /ping/home-uuid/start', 'POST /success'].sort(),
    );
    expect(first.stderr).toContain(`the success notification to ${hooks.url} failed: HTTP 500`);
    const summary = JSON.parse(hooks.requests.find((r) => r.path === '/success')!.body);
    expect(summary).toMatchObject({
      source: 'coffer',
      event: 'success',
      profile: 'home',
      backupId: outcome.backupId,
      fileCount: expect.any(Number),
    });
    expect(summary.text).toContain(`profile home`);
    // Each documented target's shape: Slack/Mattermost read `text`, Discord `content`, ntfy the templating headers
    // that make it show `text` (not the raw JSON) under a title.
    expect(summary.content).toBe(summary.text);
    const headers = hooks.requests.find((r) => r.path === '/success')!.headers;
    expect(headers).toMatchObject({ 'x-template': 'yes', 'x-message': '{{.text}}', 'x-title': 'Coffer: backup done', 'x-priority': '3' });
    for (const r of hooks.requests) {
      for (const secret of [apiKey, PASSPHRASE, CANARY_NAME, source, work]) expect(r.body).not.toContain(secret);
    }

    // not due: exit 0 with the next due time, nothing opened on the server, no hook, no notification
    hooks.requests.length = 0;
    const second = await coffer(['run', '--profile', 'home']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/^not due \(one backup per 1d\): the next backup is due .+ \(in (23 hours|1 day)/);
    expect((await records()).length).toBe(1);
    expect(hooks.requests).toEqual([]);
    expect(fs.readFileSync(log, 'utf8').split('\n').length).toBe(3);

    const status = await coffer(['schedule', 'status', '--profile', 'home', '--json']);
    expect(json(status).lastRun).toMatchObject({ lastOutcome: 'skipped', lastBackupId: outcome.backupId, interval: '1d' });
  });

  it('run: a 429 from the server (its clock disagrees) is "not due" too: exit 0, no hook run and no ping (nothing stopped), no slot left', async () => {
    const lag = await lagging.newKey({ plan: 'free' });
    expect((await cliFor(lagging.url, lag.apiKey, PASSPHRASE)(['init'])).code).toBe(0);
    const log = path.join(work, 'lag.log');
    await addProfile('lag', lagging.url, lag.apiKey, [
      '--path',
      source,
      '--before',
      `echo "before" >> ${log}`,
      '--after',
      `echo "after $COFFER_OUTCOME" >> ${log}`,
      '--healthchecks',
      `${hooks.url}/ping/lag-uuid`,
    ]);
    hooks.requests.length = 0;
    expect((await coffer(['run', '--profile', 'lag'])).code).toBe(0);
    expect(hooks.requests.map((r) => r.path)).toEqual(['/ping/lag-uuid/start', '/ping/lag-uuid']);
    const asked = Date.now();
    const again = await coffer(['run', '--profile', 'lag', '--json']);
    expect(again.code, again.stderr).toBe(0);
    const outcome = JSON.parse(again.stdout);
    expect(outcome).toMatchObject({ outcome: 'skipped', backupId: null });
    expect(outcome.message).toContain('the server refused: cadence');
    const [only, ...more] = await records(lag.accountId, lagging);
    expect(more).toEqual([]);
    expect(only!.status).toBe('READY');
    // The server's details.nextAllowedAt is a day in the past by this host's clock: clamped to now, never in the past.
    expect(only!.createdAt + 86_400_000).toBeLessThan(asked);
    expect(Date.parse(outcome.nextDueAt)).toBeGreaterThanOrEqual(asked);
    // The server said no before anything ran: the hooks ran for the first run only, and no second start ping.
    expect(fs.readFileSync(log, 'utf8')).toBe('before\nafter success\n');
    expect(hooks.requests.map((r) => r.path)).toEqual(['/ping/lag-uuid/start', '/ping/lag-uuid']);
  });

  it(
    'run: a failure runs on-failure, pings /fail with a category only; a hung hook is stopped; overdue is notified once',
    async () => {
      const other = await server.newKey({ plan: 'free' });
      expect((await cliFor(server.url, other.apiKey, PASSPHRASE)(['init'])).code).toBe(0);
      const missing = path.join(work, `gone-${CANARY_NAME}`);
      const log = path.join(work, 'fail.log');
      await addProfile('broken', server.url, other.apiKey, [
        '--path',
        missing,
        '--on-failure',
        `echo "$COFFER_HOOK $COFFER_OUTCOME" >> ${log}`,
        '--healthchecks',
        `${hooks.url}/ping/broken-uuid`,
        '--notify-failure',
        `${hooks.url}/failure`,
        '--notify-overdue',
        `${hooks.url}/overdue`,
      ]);
      // The host's state says it has been running for three days without a success: overdue (twice the 1d interval).
      const state = path.join(work, 'state/coffer/runs/broken.json');
      fs.mkdirSync(path.dirname(state), { recursive: true });
      const threeDaysAgo = new Date(Date.now() - 3 * 86_400_000).toISOString();
      fs.writeFileSync(
        state,
        JSON.stringify({
          version: 1,
          interval: '1d',
          firstRunAt: threeDaysAgo,
          lastRunAt: threeDaysAgo,
          lastOutcome: 'failure',
          lastSuccessAt: null,
          lastBackupId: null,
          nextDueAt: null,
          overdueNotifiedAt: null,
        }),
      );
      hooks.requests.length = 0;
      const failed = await coffer(['run', '--profile', 'broken']);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain('cannot back up');
      expect(fs.readFileSync(log, 'utf8')).toBe('on-failure failure\n');
      expect(hooks.requests.map((r) => `${r.method} ${r.path}`).sort()).toEqual(
        // No start ping: the run failed before the server opened a slot.
        ['POST /failure', 'POST /overdue', 'POST /ping/broken-uuid/fail'].sort(),
      );
      const failure = JSON.parse(hooks.requests.find((r) => r.path === '/failure')!.body);
      expect(hooks.requests.find((r) => r.path === '/failure')!.headers).toMatchObject({
        'x-title': 'Coffer: backup FAILED',
        'x-priority': '4',
      });
      expect(failure).toMatchObject({ event: 'failure', profile: 'broken', failure: 'source', exitCode: 1 });
      expect(JSON.parse(hooks.requests.find((r) => r.path === '/overdue')!.body)).toMatchObject({ event: 'overdue', lastSuccessAt: null });
      for (const r of hooks.requests) for (const secret of [CANARY_NAME, missing, other.apiKey]) expect(r.body).not.toContain(secret);
      expect(await records(other.accountId)).toEqual([]);

      // Again: still failing, but the overdue notice is not repeated.
      hooks.requests.length = 0;
      expect((await coffer(['run', '--profile', 'broken'])).code).toBe(1);
      expect(hooks.requests.map((r) => r.path)).not.toContain('/overdue');

      // A before hook that hangs is stopped at its timeout and fails the run (category "hook"); the slot opened for it
      // is freed.
      await addProfile('hung', server.url, other.apiKey, [
        '--path',
        source,
        '--before',
        'sleep 30',
        '--hook-timeout',
        '1',
        '--notify-failure',
        `${hooks.url}/failure`,
      ]);
      hooks.requests.length = 0;
      const hung = await coffer(['run', '--profile', 'hung']);
      expect(hung.code).toBe(1);
      expect(hung.stderr).toContain('the before hook did not finish within 1 s and was stopped');
      expect(JSON.parse(hooks.requests.find((r) => r.path === '/failure')!.body)).toMatchObject({ failure: 'hook' });
      expect((await records(other.accountId)).map((r) => r.status)).toEqual(['DELETED']);
    },
    MANY_CLIS,
  );

  it('agent: runs the loop in the foreground (not due: it waits) and ends on SIGTERM with exit 130', async () => {
    const agent = startCli(['agent', '--profile', 'home'], env);
    expect(await agent.firstLine).toMatch(/ skipped: not due \(one backup per 1d\)/);
    agent.kill('SIGTERM');
    const ended = await agent.within(20_000);
    expect(ended.code).toBe(130);
    expect(ended.stderr).toContain('coffer: interrupted');
    expect((await records()).length).toBe(1);
  });

  it(
    'a hostile server: a huge Retry-After and a past next-allowed time never crash a run; refused, no hook runs',
    async () => {
      // A loopback server that reads as a ready vault and refuses every backup with a past time and a huge Retry-After.
      let creates = 0;
      let named = false;
      const hostile = http.createServer((req, res) => {
        req.resume().on('end', () => {
          const send = (status: number, body: unknown, headers: Record<string, string> = {}) =>
            res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
          if (req.method === 'GET' && req.url === '/api/backup-account') {
            return send(200, {
              initialized: true,
              backupInterval: '30m',
              cryptoVersion: 'v1',
              kdf: null,
              wrappedMasterKey: null,
              wrappedMasterKeyNonce: null,
            });
          }
          if (req.method === 'GET' && req.url?.startsWith('/api/backups')) return send(200, { backups: [] });
          if (req.method === 'POST' && req.url === '/api/backups') {
            creates++;
            return send(
              429,
              {
                code: 'backup_cadence_exceeded',
                message: 'not yet',
                ...(named ? { details: { nextAllowedAt: new Date(Date.now() - 3_600_000).toISOString() } } : {}),
              },
              { 'retry-after': '99999999999999' },
            );
          }
          send(404, { code: 'not_found', message: 'no' });
        });
      });
      await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
      try {
        const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
        const { recipient } = json<{ recipient: string }>(await cliFor(server.url, apiKey, PASSPHRASE)(['recipient', '--json']));
        const log = path.join(work, 'hostile.log');
        await addProfile('hostile', url, 'cof_hostile_key', [
          '--path',
          source,
          '--recipient',
          recipient,
          '--before',
          `echo before >> ${log}`,
          '--after',
          `echo "after $COFFER_OUTCOME" >> ${log}`,
        ]);
        const once = await coffer(['run', '--profile', 'hostile', '--json']);
        expect(once.code, once.stderr).toBe(0);
        expect(once.stderr).not.toMatch(/Invalid time value|at .*\.js/);
        expect(JSON.parse(once.stdout)).toMatchObject({ outcome: 'skipped' });
        // The server refused before anything ran: no hook at all.
        expect(fs.existsSync(log)).toBe(false);

        named = true;
        const agent = startCli(['agent', '--profile', 'hostile'], env);
        expect(await agent.firstLine).toMatch(/ skipped: /);
        // A bounded window, not a speed check: the old loop reran the hooks every second.
        await new Promise((resolve) => setTimeout(resolve, 12_000));
        agent.kill('SIGTERM');
        expect((await agent.within(20_000)).code).toBe(130);
        expect(fs.existsSync(log)).toBe(false);
        expect(creates).toBeLessThanOrEqual(3);
      } finally {
        await new Promise<void>((resolve) => hostile.close(() => resolve()));
      }
    },
    MANY_CLIS,
  );

  it('run without a profile is a usage error', async () => {
    const result = await coffer(['run'], { XDG_CONFIG_HOME: path.join(work, 'empty-config') });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('coffer run needs a profile');
  });

  describe.skipIf(lacking(ANALYZE !== undefined, 'systemd-analyze'))('schedule', () => {
    it('install writes a service and timer that pass systemd-analyze verify; --cron; status; remove', async () => {
      if (!ANALYZE) throw new Error('systemd-analyze is missing (apt-get install systemd; the run requires it)');
      const noRecipient = await coffer(['schedule', 'install', '--profile', 'home', '--no-enable']);
      expect(noRecipient.code).toBe(2);
      expect(noRecipient.stderr).toContain('has no recipient');

      const passFile = path.join(work, 'pass phrase%.txt'); // a space and a % in the path: quoted and escaped
      fs.writeFileSync(passFile, PASSPHRASE, { mode: 0o600 });
      const installed = await coffer(['schedule', 'install', '--profile', 'home', '--no-enable', '--passphrase-file', passFile, '--json']);
      expect(installed.code, installed.stderr).toBe(0);
      const { files, timer, service } = JSON.parse(installed.stdout);
      expect(files.service).toBe(path.join(work, 'config/systemd/user/coffer-home.service'));
      expect(timer).toContain('OnUnitInactiveSec=6h'); // a quarter of the free plan's 1d
      // The run's own deadline (runTimeoutMinutes, default 720) and room for onFailure, after (300 s + 5 s each) and
      // the notifications: the run ends and reports itself before systemd stops it.
      expect(service).toContain('TimeoutStartSec=732min\n');
      expect(service).toContain(`Environment=XDG_CONFIG_HOME=${path.join(work, 'config')}`);
      expect(service).toContain(`run --profile home --passphrase-file "${passFile.replace('%', '%%')}"\n`);
      expect(installed.stderr).toContain('append-only API key');
      const verified = spawnSync(ANALYZE!, ['verify', files.timer, files.service], { encoding: 'utf8' });
      expect({ status: verified.status, output: `${verified.stdout}${verified.stderr}`.trim() }).toEqual({ status: 0, output: '' });
      // ... and the check can fail: a misspelt key is reported.
      const broken = path.join(tempDir('coffer-unit-'), 'coffer-home.timer');
      fs.writeFileSync(broken, timer.replace('OnUnitInactiveSec', 'OnUnitInactiveSecs'));
      fs.copyFileSync(files.service, path.join(path.dirname(broken), 'coffer-home.service'));
      expect(spawnSync(ANALYZE!, ['verify', broken], { encoding: 'utf8' }).stderr).toContain("Unknown key 'OnUnitInactiveSecs'");

      const cron = await coffer(['schedule', 'install', '--profile', 'home', '--cron', '--passphrase-file', passFile]);
      expect(cron.code, cron.stderr).toBe(0);
      expect(cron.stdout).toMatch(
        /^\d{1,2} \*\/6 \* \* \* XDG_CONFIG_HOME=\S+ XDG_STATE_HOME=\S+ \S+ \S+ run --profile home --passphrase-file '.+pass phrase'\\%'\.txt'\n$/,
      );

      const status = json(await coffer(['schedule', 'status', '--profile', 'home', '--json']));
      expect(status).toMatchObject({ profile: 'home', installed: true });
      const removed = json(await coffer(['schedule', 'remove', '--profile', 'home', '--no-enable', '--json']));
      expect(removed.removed).toEqual([files.timer, files.service]);
      expect(json(await coffer(['schedule', 'status', '--profile', 'home', '--json'])).installed).toBe(false);
    });
  });
});
