/**
 * The agent's trust edges through the real CLI (issue 23): notifications never follow a redirect (a 3xx is a failed
 * delivery, the summary goes nowhere else); `coffer schedule install` refuses a value with a line break or NUL and
 * quotes the rest by systemd's and cron's rules; a config file (or its folder) that others can write, or that another
 * user owns, is refused before anything in it is used.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, makeTree, runCli } from './helpers.js';
import { isRoot, lacking } from '../helpers/required.js';

const PASSPHRASE = 'hardening passphrase';
const ANALYZE = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((file) => fs.existsSync(file));

/** A loopback HTTP server recording each request and answering with `answer(path)`. */
async function receiver(answer: (url: string) => { status: number; headers?: Record<string, string> }) {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      requests.push(`${req.method} ${req.url}`);
      const { status, headers } = answer(req.url!);
      res.writeHead(status, headers).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, requests, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** What cron does to a crontab command before /bin/sh sees it (crontab(5), cronie's do_command): `\%` is `%`, a bare `%` ends it. */
function cronCommand(command: string): string {
  let out = '';
  let escaped = false;
  for (const ch of command) {
    if (escaped) {
      out += ch === '%' ? '%' : `\\${ch}`;
      escaped = false;
    } else if (ch === '\\') escaped = true;
    else if (ch === '%') throw new Error(`an unescaped % in the crontab command ends it: ${command}`);
    else out += ch;
  }
  return escaped ? `${out}\\` : out;
}

describe('agent hardening: notifications, schedule values, config permissions', () => {
  let work: string;
  let env: Record<string, string>;
  let keyFile: string;
  const coffer = (args: string[], more: Record<string, string> = {}) => runCli(args, { ...env, ...more });
  const configFile = () => path.join(env.XDG_CONFIG_HOME!, 'coffer/config.json');

  beforeAll(async () => {
    assertBuilt();
    work = tempDir('coffer-hardening-');
    await makeTree(path.join(work, 'source'));
    keyFile = path.join(work, 'api.key');
    fs.writeFileSync(keyFile, 'cfk_placeholder\n', { mode: 0o600 });
    env = { HOME: work, XDG_CONFIG_HOME: path.join(work, 'config'), XDG_STATE_HOME: path.join(work, 'state'), COFFER_KDF: 'min' };
  });

  describe('notifications', () => {
    let server: TestServer;
    let elsewhere: Awaited<ReturnType<typeof receiver>>;
    let redirector: Awaited<ReturnType<typeof receiver>>;

    beforeAll(async () => {
      server = await startTestServer();
      elsewhere = await receiver(() => ({ status: 200 }));
      // Every notification target answers with a redirect to another origin (a loopback service).
      redirector = await receiver((url) => ({
        status: url.startsWith('/ping') ? 308 : 307,
        headers: { location: `${elsewhere.url}${url}` },
      }));
    });
    afterAll(async () => {
      await redirector?.close();
      await elsewhere?.close();
      await server?.stop();
    });

    it('a 307/308 from a target is a failed delivery: nothing is re-sent to where it points', async () => {
      const { apiKey } = await server.newKey({ plan: 'free' });
      const init = await cliFor(server.url, apiKey, PASSPHRASE, { HOME: work })(['init']);
      expect(init.code, init.stderr).toBe(0);
      const file = path.join(work, 'notify.key');
      fs.writeFileSync(file, `${apiKey}\n`, { mode: 0o600 });
      const add = await coffer([
        'profile',
        'add',
        'notified',
        '--url',
        server.url,
        '--api-key-file',
        file,
        '--path',
        path.join(work, 'source'),
        '--healthchecks',
        `${redirector.url}/ping/uuid`,
        '--notify-success',
        `${redirector.url}/success`,
      ]);
      expect(add.code, add.stderr).toBe(0);
      const run = await coffer(['run', '--profile', 'notified'], { COFFER_PASSPHRASE: PASSPHRASE });
      expect(run.code, run.stderr).toBe(0);
      expect(redirector.requests.sort()).toEqual(['POST /ping/uuid', 'POST /ping/uuid/start', 'POST /success']);
      expect(elsewhere.requests).toEqual([]);
      expect(run.stderr).toContain(`the success notification to ${redirector.url} failed: HTTP 307: a redirect, not followed`);
      expect(run.stderr).toContain(`the start notification to ${redirector.url} failed: HTTP 308: a redirect, not followed`);
      expect(run.stderr).not.toContain('/success'); // the path (a webhook's secret) is never shown
    });
  });

  describe('schedule install: the values written into a unit or a crontab line', () => {
    beforeAll(async () => {
      const add = await coffer([
        'profile',
        'add',
        'home',
        '--url',
        'http://127.0.0.1:9',
        '--api-key-file',
        keyFile,
        '--path',
        path.join(work, 'source'),
      ]);
      expect(add.code, add.stderr).toBe(0);
    });

    it('a line break or NUL in a path or the environment is refused, and nothing is written', async () => {
      const unitDir = path.join(env.XDG_CONFIG_HOME!, 'systemd/user');
      const injected = path.join(work, 'x\nExecStartPre=/bin/touch /tmp/coffer-pwned\n');
      for (const extra of [[], ['--cron']]) {
        const result = await coffer([
          'schedule',
          'install',
          '--profile',
          'home',
          '--no-enable',
          '--interval',
          '1d',
          '--passphrase-file',
          injected,
          ...extra,
        ]);
        expect(result.code, result.stderr).toBe(2);
        expect(result.stderr).toContain(
          'holds a line break, NUL or another control character: it cannot be written into a unit or a crontab line; nothing was written',
        );
        expect(result.stdout).toBe('');
      }
      const oddConfig = `${env.XDG_CONFIG_HOME}\rExecStartPre=/bin/true`;
      fs.mkdirSync(path.join(oddConfig, 'coffer'), { recursive: true, mode: 0o700 });
      fs.copyFileSync(configFile(), path.join(oddConfig, 'coffer/config.json'));
      for (const [variable, value] of [
        ['XDG_STATE_HOME', `${env.XDG_STATE_HOME}\rExecStartPre=/bin/true`],
        ['XDG_CONFIG_HOME', oddConfig],
      ] as const) {
        const result = await coffer(
          ['schedule', 'install', '--profile', 'home', '--no-enable', '--interval', '1d', '--passphrase-file', keyFile],
          { [variable]: value },
        );
        expect(result.code, `${variable}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toContain(`${variable} holds a line break`);
      }
      expect(fs.existsSync(unitDir)).toBe(false);
      expect(fs.existsSync(path.join(oddConfig, 'systemd'))).toBe(false);
    });

    it.skipIf(lacking(ANALYZE !== undefined, 'systemd-analyze'))(
      'spaces, %, $, quotes and backslashes are quoted right: the unit verifies, cron and sh give the same words',
      async () => {
        if (!ANALYZE) throw new Error('systemd-analyze is missing (apt-get install systemd; the run requires it)');
        const odd = (name: string) => path.join(work, name);
        const passFile = odd(`pass "it's" 100% $HOME \\%x.txt`);
        fs.writeFileSync(passFile, PASSPHRASE, { mode: 0o600 });
        const more = { XDG_CONFIG_HOME: odd('conf $x %y'), XDG_STATE_HOME: odd("state 'q' \\%") };
        fs.mkdirSync(path.join(more.XDG_CONFIG_HOME, 'coffer'), { recursive: true, mode: 0o700 });
        fs.copyFileSync(configFile(), path.join(more.XDG_CONFIG_HOME, 'coffer/config.json'));
        const base = ['schedule', 'install', '--profile', 'home', '--interval', '1d', '--passphrase-file', passFile];

        const installed = await coffer([...base, '--no-enable', '--json'], more);
        expect(installed.code, installed.stderr).toBe(0);
        const { files, service } = JSON.parse(installed.stdout);
        const execStart = service.split('\n').find((l: string) => l.startsWith('ExecStart='));
        expect(
          execStart.endsWith(
            ` run --profile home --passphrase-file "${passFile.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%').replace(/\$/g, '$$$$')}"`,
          ),
        ).toBe(true);
        expect(service).toContain(`Environment="XDG_CONFIG_HOME=${more.XDG_CONFIG_HOME.replace(/%/g, '%%')}"\n`); // `$` stays: no expansion there
        expect(service).toContain(`Environment="XDG_STATE_HOME=${more.XDG_STATE_HOME.replace(/\\/g, '\\\\').replace(/%/g, '%%')}"\n`);
        const verified = spawnSync(ANALYZE!, ['verify', files.timer, files.service], { encoding: 'utf8' });
        expect({ status: verified.status, output: `${verified.stdout}${verified.stderr}`.trim() }).toEqual({ status: 0, output: '' });

        const cron = await coffer([...base, '--cron'], more);
        expect(cron.code, cron.stderr).toBe(0);
        const line = cron.stdout.trim();
        expect(line.split('\n')).toHaveLength(1);
        // The command as cron hands it to sh, with the node program swapped for one that prints what it is given.
        const command = cronCommand(line.split(' ').slice(5).join(' ')).replace(
          process.execPath,
          `/bin/sh -c 'printf "%s\\n" "$XDG_CONFIG_HOME" "$XDG_STATE_HOME" "$@"' sh`,
        );
        const words = spawnSync('/bin/sh', ['-c', command], { encoding: 'utf8' }).stdout.split('\n').slice(0, -1);
        expect(words.slice(0, 2)).toEqual([more.XDG_CONFIG_HOME, more.XDG_STATE_HOME]);
        expect(words.slice(3)).toEqual(['run', '--profile', 'home', '--passphrase-file', passFile]);
      },
    );
  });

  describe('the config file and its folder: refused when others can change them', () => {
    const marker = () => path.join(work, 'key-command-ran');

    beforeAll(async () => {
      fs.rmSync(path.join(env.XDG_CONFIG_HOME!, 'coffer'), { recursive: true, force: true });
      const add = await coffer([
        'profile',
        'add',
        'cmd',
        '--url',
        'http://127.0.0.1:9',
        '--api-key-command',
        `touch ${marker()}; echo cfk_x`,
        '--path',
        work,
      ]);
      expect(add.code, add.stderr).toBe(0);
      expect(fs.statSync(configFile()).mode & 0o777).toBe(0o600);
    });

    const refused = async (what: RegExp) => {
      const before = fs.readFileSync(configFile(), 'utf8');
      for (const args of [
        ['list', '--profile', 'cmd'],
        ['profile', 'list'],
        ['profile', 'remove', 'cmd'],
      ]) {
        const result = await coffer(args);
        expect(result.code, result.stderr).toBe(2);
        expect(result.stderr).toMatch(what);
        expect(result.stderr).toContain('only you may be able to change it');
        expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
      }
      expect(fs.existsSync(marker())).toBe(false); // the API key command never ran
      expect(fs.readFileSync(configFile(), 'utf8')).toBe(before); // nothing changed
    };

    it('a config.json others can write (0666, 0620) is refused with a clear message and exit 2', async () => {
      fs.chmodSync(configFile(), 0o666);
      await refused(
        /refusing to read .*config\.json: the file is writable by its group and all users \(mode 0666\)\..*fix: chmod go-w .*config\.json/,
      );
      fs.chmodSync(configFile(), 0o620);
      await refused(/the file is writable by its group \(mode 0620\)/);
      fs.chmodSync(configFile(), 0o644); // readable by others is not refused
      const ok = await coffer(['profile', 'list']);
      expect(ok.code, ok.stderr).toBe(0);
      fs.chmodSync(configFile(), 0o600);
    });

    it('a folder others can write (0777) is refused, and no config file is written into it', async () => {
      const folder = path.dirname(configFile());
      const content = fs.readFileSync(configFile());
      fs.chmodSync(folder, 0o777);
      try {
        await refused(/its folder is writable by its group and all users \(mode 0777\)\..*fix: chmod go-w /);
        // Nor is a first config file written into such a folder.
        fs.rmSync(configFile());
        const add = await coffer(['profile', 'add', 'new', '--url', 'http://127.0.0.1:9', '--api-key-file', keyFile, '--path', work]);
        expect(add.code, add.stderr).toBe(2);
        expect(add.stderr).toMatch(/its folder is writable by its group and all users/);
        expect(fs.readdirSync(folder)).toEqual([]);
      } finally {
        fs.chmodSync(folder, 0o700);
        fs.writeFileSync(configFile(), content, { mode: 0o600 });
      }
    });

    it.skipIf(lacking(isRoot, 'root'))('a file or folder owned by another user (nobody) is refused (run as root)', async () => {
      fs.chownSync(configFile(), 65534, 65534);
      await refused(/the file is owned by uid 65534, not by you \(uid 0\).*fix: chown 0 /);
      fs.chownSync(configFile(), 0, 0);
      const folder = path.dirname(configFile());
      fs.chownSync(folder, 65534, 65534);
      try {
        await refused(/its folder is owned by uid 65534, not by you/);
      } finally {
        fs.chownSync(folder, 0, 0);
      }
    });
  });
});
