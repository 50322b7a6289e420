/**
 * The hidden passphrase prompt on a real terminal (tmux, a pseudo-terminal): `coffer init` against a real server,
 * typed `ab`, ← (ESC[D), `c`, Home (ESC[1~), Enter, twice. The prompt is a line editor (src/cli/hidden-input.ts):
 * the stored passphrase is `acb`, what the keys mean, never the text of the escape sequences; the vault opens with
 * `acb` and not with `ab\x1b[Dc\x1b[1~`. A bracketed paste (ESC[200~ … ESC[201~) gives the pasted text.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HiddenLine, type KeyPress } from '../../src/cli/hidden-input.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, CLI, cliFor, json } from './helpers.js';
import { lacking } from '../helpers/required.js';

const TMUX = ['/usr/bin/tmux', '/bin/tmux', '/usr/local/bin/tmux'].find((file) => fs.existsSync(file));

/** A bound against a hang on a loaded machine (Argon2id runs twice per command), not a timing check. */
const SLOW = 120_000;

const hex = (text: string) => Array.from(Buffer.from(text, 'utf8'), (b) => b.toString(16).padStart(2, '0'));

describe.skipIf(lacking(TMUX !== undefined, 'tmux'))('the passphrase prompt on a terminal (tmux)', () => {
  let server: TestServer;
  let apiKey: string;
  let work: string;
  let socket: string;
  let sessions = 0;

  const tmux = (...args: string[]) => {
    const result = spawnSync(TMUX!, ['-S', socket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`tmux ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };

  /** Waits (polling the pane, bounded) until the pane shows `text` (tmux trims trailing spaces); returns the pane. */
  async function waitFor(session: string, text: string, done?: string): Promise<string> {
    for (let i = 0; i < 2400; i++) {
      const pane = tmux('capture-pane', '-p', '-t', session);
      if (pane.includes(text)) return pane;
      if (done && fs.existsSync(done)) throw new Error(`the command ended before "${text}" appeared:\n${pane}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`"${text}" did not appear:\n${tmux('capture-pane', '-p', '-t', session)}`);
  }

  /** Starts `coffer <args>` in a new tmux window (a real terminal); the exit code lands in a file. */
  function start(args: string[], env: Record<string, string>) {
    const session = `s${++sessions}`;
    const exitFile = path.join(work, `${session}.exit`);
    const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
    const vars = Object.entries({
      HOME: work,
      XDG_CONFIG_HOME: path.join(work, 'config'),
      XDG_STATE_HOME: path.join(work, 'state'),
      LANG: 'C.UTF-8',
      ...env,
    })
      .map(([k, v]) => `${k}=${quote(v)}`)
      .join(' ');
    const script = path.join(work, `${session}.sh`);
    fs.writeFileSync(
      script,
      `env -i PATH="$PATH" ${vars} ${quote(process.execPath)} ${quote(CLI)} ${args.map(quote).join(' ')}\necho $? > ${quote(exitFile)}.tmp && mv ${quote(exitFile)}.tmp ${quote(exitFile)}\nsleep 600\n`,
    );
    tmux('new-session', '-d', '-s', session, '-x', '200', '-y', '50', `/bin/sh ${quote(script)}`);
    return { session, exitFile };
  }

  async function exitCode(session: string, exitFile: string): Promise<number> {
    for (let i = 0; i < 2400 && !fs.existsSync(exitFile); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    if (!fs.existsSync(exitFile)) throw new Error(`no exit:\n${tmux('capture-pane', '-p', '-t', session)}`);
    return Number(fs.readFileSync(exitFile, 'utf8').trim());
  }

  const keys = (session: string, bytes: string) => tmux('send-keys', '-t', session, '-H', ...hex(bytes));

  beforeAll(async () => {
    if (!TMUX) throw new Error('tmux is missing (CI=true: this test must not be skipped; .ci/run installs it)');
    assertBuilt();
    server = await startTestServer();
    ({ apiKey } = await server.newKey({ plan: 'free' }));
    work = tempDir('coffer-tty-');
    socket = path.join(work, 'tmux.sock');
  });

  afterAll(async () => {
    if (socket && fs.existsSync(socket)) spawnSync(TMUX!, ['-S', socket, 'kill-server']);
    await server?.stop();
  });

  it(
    'init: ab ← c Home Enter (twice) stores "acb", what a line editor gives; the escape text is not stored',
    async () => {
      const env = { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_KDF: 'min' };
      const { session, exitFile } = start(['init'], env);
      const typed = 'ab\x1b[Dc\x1b[1~\r';
      await waitFor(session, 'Passphrase:', exitFile);
      keys(session, typed);
      await waitFor(session, 'Repeat the passphrase:', exitFile);
      keys(session, typed);
      const code = await exitCode(session, exitFile);
      const pane = tmux('capture-pane', '-p', '-t', session);
      expect(code, pane).toBe(0);
      expect(pane).not.toContain('acb'); // nothing echoed

      const cli = cliFor(server.url, apiKey, undefined);
      const open = (passphrase: string) => cli(['recipient'], { COFFER_PASSPHRASE: passphrase });
      expect((await open('acb')).code).toBe(0);
      expect((await open('ab\x1b[Dc\x1b[1~')).code).toBe(4);
      expect((await open('ab[Dc[1~')).code).toBe(4);
      expect((await open('abc')).code).toBe(4);
    },
    SLOW,
  );

  it(
    'a bracketed paste gives the pasted text (its line break left out, it does not submit); other keys are ignored',
    async () => {
      const env = { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_KDF: 'min', COFFER_PASSPHRASE: 'acb' };
      const { session, exitFile } = start(['passphrase'], env);
      await waitFor(session, 'New passphrase:', exitFile);
      // A paste with a line break inside, an arrow up and F5 (ignored), then Enter.
      keys(session, '\x1b[200~pasted pass\rphrase\x1b[201~\x1b[A\x1b[15~\r');
      await waitFor(session, 'Repeat the new passphrase:', exitFile);
      keys(session, 'pasted passphrase\r');
      const code = await exitCode(session, exitFile);
      expect(code, tmux('capture-pane', '-p', '-t', session)).toBe(0);
      const cli = cliFor(server.url, apiKey, undefined);
      expect((await cli(['recipient'], { COFFER_PASSPHRASE: 'pasted passphrase' })).code).toBe(0);
    },
    SLOW,
  );

  it(
    'COFFER_PASSPHRASE= (set to nothing) is "no passphrase here": a recipient backup needs none, and nothing ever asks on the terminal',
    async () => {
      const cli = cliFor(server.url, apiKey, undefined);
      const { recipient } = json<{ recipient: string }>(await cli(['recipient', '--json'], { COFFER_PASSPHRASE: 'pasted passphrase' }));
      const source = path.join(work, 'empty-passphrase-source');
      fs.mkdirSync(source);
      fs.writeFileSync(path.join(source, 'a.txt'), 'a\n');
      const env = { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_KDF: 'min', COFFER_PASSPHRASE: '' };
      const sealed = start(['backup', source], { ...env, COFFER_RECIPIENT: recipient });
      expect(await exitCode(sealed.session, sealed.exitFile), tmux('capture-pane', '-p', '-t', sealed.session)).toBe(0);
      expect(tmux('capture-pane', '-p', '-t', sealed.session)).not.toContain('Passphrase:');
      // A command that needs the passphrase stops at once instead of asking (a script that set it must not hang).
      const listed = start(['list', '--chain'], env);
      const code = await exitCode(listed.session, listed.exitFile);
      const pane = tmux('capture-pane', '-p', '-t', listed.session);
      expect(code, pane).toBe(2);
      expect(pane).toContain('COFFER_PASSPHRASE is set to nothing');
      expect(pane).not.toContain('Passphrase:');
    },
    SLOW,
  );
});

describe('the hidden line editor (the keys as readline decodes them)', () => {
  /** Feeds `text` through readline's key decoder into a HiddenLine; the value at the first submit. */
  async function typed(text: string): Promise<{ value: string; result: string }> {
    const { PassThrough } = await import('node:stream');
    const readline = await import('node:readline');
    const input = new PassThrough();
    readline.emitKeypressEvents(input);
    const line = new HiddenLine();
    let result = 'continue';
    input.on('keypress', (ch: string | undefined, key: KeyPress | undefined) => {
      if (result === 'continue') result = line.key(ch, key);
    });
    input.write(text);
    return { value: line.value, result };
  }

  it('edits like a visible line: arrows, Home/End, Backspace, Delete, Ctrl-U/K/W', async () => {
    expect(await typed('ab\x1b[Dc\x1b[1~\r')).toEqual({ value: 'acb', result: 'submit' });
    expect(await typed('abc\x1b[H\x1b[3~\x1b[Fd\r')).toEqual({ value: 'bcd', result: 'submit' });
    expect(await typed('abc\x7f\x1b[D\x1b[D\x1b[C\x15x\r')).toEqual({ value: 'xb', result: 'submit' });
    expect(await typed('one two\x17three\r')).toEqual({ value: 'one three', result: 'submit' });
    expect(await typed('abc\x01\x1b[C\x0b\r')).toEqual({ value: 'a', result: 'submit' });
    expect(await typed('ünï 😀\r')).toEqual({ value: 'ünï 😀', result: 'submit' });
  });

  it('ignores keys that are not text (↑, F5, Alt-x, unknown sequences, Tab); Ctrl-C and Ctrl-D on an empty line cancel', async () => {
    expect(await typed('a\x1b[A\x1b[15~\x1bx\x1b[1;5X\tb\r')).toEqual({ value: 'ab', result: 'submit' });
    expect((await typed('abc\x03')).result).toBe('cancel');
    expect((await typed('\x04')).result).toBe('cancel');
  });

  it('a bracketed paste inserts its text at the cursor without line breaks and does not submit', async () => {
    expect(await typed('ad\x1b[D\x1b[200~b\r\nc\x1b[201~')).toEqual({ value: 'abcd', result: 'continue' });
  });
});
