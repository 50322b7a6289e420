/**
 * What the CLI says to a new user (issue 35, point 20), through the real CLI and a real server: a mistyped command
 * gets its "Did you mean …?" and a pointer to the help, not the whole ~70-line help under it; `verify --all` after a
 * first backup ends in plain words, not chain jargon; counts agree with their nouns ("1 file", "1 backup").
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, json, runCli } from './helpers.js';

const HANG_GUARD = 120_000;

describe('the CLI in plain words', { timeout: HANG_GUARD }, () => {
  let server: TestServer;
  let owner: ReturnType<typeof cliFor>;
  let source: string;

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    const { apiKey } = await server.newKey({ plan: 'free' });
    const work = tempDir('coffer-cli-words-');
    source = path.join(work, 'one-file');
    fs.mkdirSync(source);
    fs.writeFileSync(path.join(source, 'only.txt'), 'the only file\n');
    owner = cliFor(server.url, apiKey, 'cli words passphrase');
    expect((await owner(['init'])).code).toBe(0);
  }, HANG_GUARD);

  afterAll(async () => {
    await server?.stop();
  });

  it('a mistyped command: the suggestion and a pointer to the help, in a few lines (exit 2)', async () => {
    for (const [args, suggestion, pointer] of [
      [['bakup'], '(Did you mean backup?)', '(`coffer --help` lists the commands)'],
      [['schedule', 'stauts'], '(Did you mean status?)', '(`coffer schedule --help` shows its usage)'],
      [['backup', '--exlude', 'x'], '(Did you mean --exclude?)', '(`coffer backup --help` shows its usage)'],
    ] as const) {
      const result = await runCli([...args], {});
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(suggestion);
      expect(result.stderr).toContain(pointer);
      expect(result.stderr.trim().split('\n').length).toBeLessThanOrEqual(3);
      expect(result.stderr + result.stdout).not.toContain('Usage:');
    }
  });

  it('a first backup: "1 file"; verify --all then ends in plain words, "1 backup" where counted', async () => {
    const made = await owner(['backup', source]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toMatch(/READY: 1 file, /);
    const verified = await owner(['verify', '--all']);
    expect(verified.code, verified.stderr).toBe(0);
    const last = verified.stdout.trim().split('\n').at(-1)!;
    expect(last).toBe(
      '1 backup was made without a profile: only backups made with a profile (coffer run, coffer backup --profile) carry a history to check',
    );
    expect(verified.stdout).not.toMatch(/\(s\)|belong to no chain|\b1 backups\b|\b1 files\b/);
    const { id } = json<{ backups: { id: string }[] }>(await owner(['list', '--json'])).backups[0]!;
    // A record whose key the server altered: "1 backup failed verification", not "1 backup(s)".
    const record = (await server.parts.stores.backups.getBackup(id))!;
    await server.parts.stores.backups.updateBackup(
      id,
      { statuses: ['READY'] },
      { wrappedDekNonce: Buffer.alloc(24, 9).toString('base64') },
    );
    try {
      const failed = await owner(['verify', id]);
      expect(failed.code).toBe(4);
      expect(failed.stderr).toContain('coffer: 1 backup failed verification');
    } finally {
      await server.parts.stores.backups.updateBackup(id, { statuses: ['READY'] }, { wrappedDekNonce: record.wrappedDekNonce });
    }
  });
});
