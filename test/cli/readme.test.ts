/**
 * README.md's client block, run as written: each line through bash in this checkout (so `npx coffer` resolves as it
 * does for a reader after `npm ci && npm start`), against a real `coffer serve` on a fresh data directory. The only
 * changes are the block's own placeholders: the printed key (`cfk_...`), the server's address (a free port here,
 * not 8080) and `<id>` (a backup's id from `coffer list`). HOME is a temp directory, so `~/…` stays in it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServeNode, type ServeNode } from '../helpers/serve-node.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, CLI, ROOT } from '../client/helpers.js';

const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/** The first ```sh block after `heading`, as its lines. */
function shBlock(heading: string): string[] {
  const section = README.slice(README.indexOf(heading));
  const match = /```sh\n([\s\S]*?)```/.exec(section);
  if (!match) throw new Error(`no sh block after ${heading}`);
  return match[1]!.split('\n').filter((line) => line.trim() !== '');
}

/** Runs a command to its end (never blocking the test's own process), with its exit status and output. */
function run(file: string, args: string[], options: { cwd?: string; env: Record<string, string> }) {
  return new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
    execFile(file, args, { ...options, encoding: 'utf8', timeout: 120_000 }, (error, stdout, stderr) =>
      resolve({ status: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
    );
  });
}

async function newestId(url: string, apiKey: string, home: string): Promise<string> {
  const listed = await run(process.execPath, [CLI, 'list', '--json'], {
    env: { PATH: process.env.PATH!, HOME: home, COFFER_URL: url, COFFER_API_KEY: apiKey },
  });
  return (JSON.parse(listed.stdout) as { backups: { id: string }[] }).backups[0]!.id;
}

describe("README's client block", () => {
  let node: ServeNode;
  beforeAll(async () => {
    assertBuilt();
    node = await startServeNode('readme', {});
  });
  afterAll(() => node?.child.kill('SIGKILL'));

  it('starts with `npm ci && npm start` and `npm test`', () => {
    expect(shBlock('# Coffer').map((line) => line.replace(/\s+#.*$/, ''))).toEqual(['npm ci && npm start', 'npm test']);
  });

  it('runs as written on a fresh checkout, every command found and succeeding', async () => {
    const key = /API key \(shown once, store it now\): (cfk_[A-Za-z0-9_-]{43})/.exec(node.output())![1]!;
    const lines = shBlock('## Back up and restore (the client)');
    // Every command is one a fresh clone has: the export, then `npx coffer`, never a bare `coffer`.
    expect(lines[0]).toMatch(/^export COFFER_URL=http:\/\/localhost:8080 COFFER_API_KEY=cfk_\.\.\. /);
    for (const line of lines.slice(1)) expect(line, line).toMatch(/^npx coffer /);
    const home = tempDir('coffer-readme-home-');
    const env = {
      PATH: process.env.PATH!,
      HOME: home,
      ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
      // npm 11 (Node 24) turns on the module compile cache, which would leave a folder in the run's temp root.
      NODE_DISABLE_COMPILE_CACHE: '1',
      // What `coffer init` would ask for; the small Argon2id cost keeps the test fast.
      COFFER_PASSPHRASE: 'readme passphrase',
      COFFER_KDF: 'min',
      npm_config_update_notifier: 'false',
    };
    const exported = lines[0]!.replace('cfk_...', key).replace('http://localhost:8080', node.url);
    const ran: string[] = [];
    for (const line of lines.slice(1)) {
      // `<id>`: the newest backup's, as `coffer list --json` names it.
      const id = line.includes('<id>') ? await newestId(node.url, key, home) : '';
      const result = await run('bash', ['-c', `set -e\n${exported}\n${line.replaceAll('<id>', id)}`], { cwd: ROOT, env });
      expect(result.status, `${line}\n${result.stderr}`).toBe(0);
      ran.push(line.split(/\s+#/)[0]!.trim());
    }
    expect(ran.map((line) => line.split(' ').slice(0, 3).join(' '))).toEqual([
      'npx coffer init',
      'npx coffer backup',
      'npx coffer list',
      'npx coffer ls',
      'npx coffer restore',
      'npx coffer verify',
      'npx coffer kit',
    ]);
    // What the block says it does: docs/ restored into ~/restored, the kit a new 0600 file.
    expect(fs.readFileSync(path.join(home, 'restored/client.md'), 'utf8')).toBe(fs.readFileSync(path.join(ROOT, 'docs/client.md'), 'utf8'));
    expect(fs.statSync(path.join(home, 'coffer-kit.txt')).mode & 0o777).toBe(0o600);
  }, 600_000);
});
