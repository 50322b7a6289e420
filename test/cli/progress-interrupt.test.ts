/**
 * Ctrl-C during a backup with its progress bar on a real terminal (tmux): the bar ends before anything else is
 * written, so the messages of the interrupted command (the slot it deleted, "interrupted") stand on lines of their
 * own instead of being drawn over (`coffer: interrupteding [███…] 18%`). The upload goes through a proxy that stops
 * forwarding after 4 MiB, so the backup is still running, its bar drawn, when Ctrl-C comes.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, cliFor } from '../client/helpers.js';
import { stallingProxy } from '../client/proxy.js';
import { lacking } from '../helpers/required.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';

const TMUX = ['/usr/bin/tmux', '/bin/tmux', '/usr/local/bin/tmux'].find((file) => fs.existsSync(file));
const MIB = 1024 * 1024;

describe.skipIf(lacking(Boolean(TMUX), 'tmux'))('Ctrl-C with the progress bar on a terminal (tmux)', () => {
  let server: TestServer;
  let proxy: Awaited<ReturnType<typeof stallingProxy>>;
  let apiKey: string;
  let work: string;
  let socket: string;

  const tmux = (...args: string[]) => {
    const result = spawnSync(TMUX!, ['-S', socket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`tmux ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };
  const pane = (session: string) => tmux('capture-pane', '-p', '-t', session);

  /** Polls (bounded: a hang guard) until `check` holds, on the pane as last seen. */
  async function until(what: string, check: (shown: string) => boolean, session: string): Promise<string> {
    let shown = '';
    for (let i = 0; i < 1200; i++) {
      shown = pane(session);
      if (check(shown)) return shown;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`${what} did not happen:\n${shown}`);
  }

  beforeAll(async () => {
    if (!TMUX) throw new Error('tmux is missing (CI=true: this test must not be skipped; .ci/run installs it)');
    assertBuilt();
    server = await startTestServer();
    ({ apiKey } = await server.newKey({ plan: 'pro' }));
    work = tempDir('coffer-tty-progress-');
    socket = path.join(work, 'tmux.sock');
    const init = await cliFor(server.url, apiKey, 'bar passphrase')(['init']);
    expect(init.code, init.stderr).toBe(0);
    proxy = await stallingProxy(Number(new URL(server.url).port), { upload: 4 * MIB });
  });

  afterAll(async () => {
    if (socket && fs.existsSync(socket)) spawnSync(TMUX!, ['-S', socket, 'kill-server']);
    await proxy?.close();
    await server?.stop();
  });

  it('the bar is ended before "interrupted" and the cleanup messages are written; exit 130', async () => {
    const source = path.join(work, 'source');
    fs.mkdirSync(source);
    for (let i = 0; i < 4; i++) fs.writeFileSync(path.join(source, `random-${i}.bin`), randomBytes(8 * MIB));
    const exitFile = path.join(work, 'exit');
    const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
    const vars = Object.entries({
      HOME: work,
      XDG_CONFIG_HOME: path.join(work, 'config'),
      XDG_STATE_HOME: path.join(work, 'state'),
      LANG: 'C.UTF-8',
      COFFER_URL: proxy.url,
      COFFER_API_KEY: apiKey,
      COFFER_PASSPHRASE: 'bar passphrase',
    })
      .map(([k, v]) => `${k}=${quote(v)}`)
      .join(' ');
    const script = path.join(work, 'run.sh');
    fs.writeFileSync(
      script,
      // The shell outlives the Ctrl-C (a caught signal is default again in the CLI): the pane stays to be read.
      `trap : INT\nenv -i PATH="$PATH" ${vars} ${quote(process.execPath)} ${quote(CLI)} backup ${quote(source)}\n` +
        `echo $? > ${quote(exitFile)}.tmp && mv ${quote(exitFile)}.tmp ${quote(exitFile)}\nsleep 600\n`,
    );
    tmux('new-session', '-d', '-s', 'bar', '-x', '160', '-y', '40', `/bin/sh ${quote(script)}`);
    await until('the progress bar', (shown) => /encrypting \+ uploading \[.*\] \d+%/.test(shown), 'bar');
    // The upload is stuck behind the proxy; the bar keeps redrawing (8 times a second) while Ctrl-C comes.
    await new Promise((resolve) => setTimeout(resolve, 500));
    tmux('send-keys', '-t', 'bar', 'C-c');
    await until('the exit', () => fs.existsSync(exitFile), 'bar');
    const shown = pane('bar');
    expect(fs.readFileSync(exitFile, 'utf8').trim(), shown).toBe('130');
    const lines = shown.split('\n').map((line) => line.trimEnd());
    // Each message on a line of its own, and no bar drawn after (or over) the first of them.
    const interrupted = lines.findIndex((line) => line.includes('interrupted'));
    expect(lines[interrupted], shown).toBe('coffer: interrupted');
    const deleted = lines.findIndex((line) => line.includes('deleted the upload slot'));
    expect(lines[deleted], shown).toMatch(/^deleted the upload slot [0-9a-f-]{36}$/);
    expect(
      lines.slice(Math.min(deleted, interrupted)).filter((line) => line.includes('%')),
      shown,
    ).toEqual([]);
  }, 120_000);
});
