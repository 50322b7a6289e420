/**
 * Human output that cannot be faked or leaked, through the real CLI and a real server: `coffer ls` escapes control
 * characters, newlines and tabs in names and link targets (the JSON stays exact); `coffer kit --output <file>` creates
 * the kit 0600 whatever the umask and never overwrites, and `coffer kit > file` warns when others can read the file.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, baseEnv, CLI, cliFor, type Cli, json } from './helpers.js';

const PASSPHRASE = 'ls and kit passphrase';

describe('coffer ls escapes names; coffer kit --output', () => {
  let server: TestServer;
  let work: string;
  let cli: Cli;
  let env: Record<string, string>;
  /** The kit tests' own account. */
  let key = '';

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    const { apiKey } = await server.newKey({ plan: 'free' });
    work = tempDir('coffer-ls-kit-');
    env = { HOME: work, XDG_CONFIG_HOME: path.join(work, 'config'), XDG_STATE_HOME: path.join(work, 'state') };
    cli = cliFor(server.url, apiKey, PASSPHRASE, env);
    const init = await cli(['init']);
    expect(init.code, init.stderr).toBe(0);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('ls: a name with a newline, tab, escape or bidi control is one escaped line; --json keeps the exact names', async () => {
    const source = path.join(work, 'source');
    fs.mkdirSync(source);
    const names = [
      'evil\n-rw-r--r--  1  2020-01-01 00:00  fake.txt',
      'tab\there.txt',
      'esc\x1b[31mred.txt',
      'cr\rover.txt',
      'back\\slash.txt',
      'bidi\u202Etxt.exe',
      'plain.txt',
    ];
    for (const name of names) fs.writeFileSync(path.join(source, name), 'x');
    fs.symlinkSync('target\nwith a line', path.join(source, 'link'));
    const id = json(await cli(['backup', source, '--json'])).id as string;

    const listed = json(await cli(['ls', id, '--json'])).entries as { path: string; linkTarget?: string }[];
    expect(listed.map((e) => e.path).sort()).toEqual([...names, 'link'].sort());
    expect(listed.find((e) => e.path === 'link')!.linkTarget).toBe('target\nwith a line');

    const human = await cli(['ls', id]);
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.split('\n').slice(0, -1);
    expect(lines).toHaveLength(listed.length); // one line per entry: no name makes another
    // eslint-disable-next-line no-control-regex
    expect(human.stdout).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f\u202e]/);
    const shown = (name: string) => lines.some((line) => line.endsWith(`  ${name}`));
    for (const name of [
      'evil\\n-rw-r--r--  1  2020-01-01 00:00  fake.txt',
      'tab\\there.txt',
      'esc\\x1b[31mred.txt',
      'cr\\rover.txt',
      'back\\\\slash.txt',
      'bidi\\u202etxt.exe',
      'plain.txt',
      'link -> target\\nwith a line',
    ]) {
      expect(shown(name), `${name} in\n${human.stdout}`).toBe(true);
    }
  });

  /** The CLI with stdout going to `fd` (a file), under `umask`; resolves with the exit code and stderr. */
  function kitTo(args: string[], stdout: number | 'pipe', umask = '022'): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn('/bin/sh', ['-c', `umask ${umask}; exec "$0" "$@"`, process.execPath, CLI, 'kit', ...args], {
        env: baseEnv({ ...env, COFFER_URL: server.url, COFFER_API_KEY: key, COFFER_PASSPHRASE: PASSPHRASE }),
        stdio: ['ignore', stdout, 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
      child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code: code ?? -1, stdout: out, stderr: err }));
    });
  }

  it('kit --output: a new 0600 file (also under umask 000), never an existing file or a symlink; the same kit as stdout', async () => {
    key = (await server.newKey({ plan: 'free' })).apiKey;
    const owner = cliFor(server.url, key, PASSPHRASE, env);
    expect((await owner(['init'])).code).toBe(0);
    const printed = await owner(['kit']);
    expect(printed.code, printed.stderr).toBe(0);

    const file = path.join(work, 'kit.txt');
    const written = await kitTo(['--output', file], 'pipe', '000');
    expect(written.code, written.stderr).toBe(0);
    expect(written.stdout).toBe('');
    expect(written.stderr).toContain(`wrote the recovery kit to ${file} (mode 0600)`);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(file, 'utf8')).toBe(printed.stdout);

    fs.writeFileSync(file, 'keep me');
    const again = await kitTo(['--output', file], 'pipe');
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`--output ${file} already exists`);
    expect(fs.readFileSync(file, 'utf8')).toBe('keep me');

    const elsewhere = path.join(work, 'elsewhere.txt');
    const link = path.join(work, 'link.txt');
    fs.symlinkSync(elsewhere, link); // dangling: O_EXCL refuses it all the same
    const viaLink = await kitTo(['--output', link], 'pipe');
    expect(viaLink.code).toBe(2);
    expect(fs.existsSync(elsewhere)).toBe(false);
  });

  it('kit > file: a warning when the file is readable by others (0644), none when it is 0600', async () => {
    const shared = path.join(work, 'shared-kit.txt');
    const fd = fs.openSync(shared, 'w', 0o644);
    fs.fchmodSync(fd, 0o644);
    const result = await kitTo([], fd);
    fs.closeSync(fd);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('WARNING: the kit is going to a file that other users can read (mode 0644)');
    expect(result.stderr).toContain('coffer kit --output <file>');
    expect(fs.readFileSync(shared, 'utf8')).toMatch(/\S/);

    const own = path.join(work, 'own-kit.txt');
    const privateFd = fs.openSync(own, 'w', 0o600);
    const quiet = await kitTo([], privateFd);
    fs.closeSync(privateFd);
    expect(quiet.code, quiet.stderr).toBe(0);
    expect(quiet.stderr).not.toContain('other users can read');
  });
});
