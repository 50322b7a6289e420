/**
 * Passphrases (never from argv, never printed), `coffer passphrase` (rotate: backups stay readable, the old
 * passphrase stops working), wrong passphrases (exit 4, nothing written), and usage errors (exit 2).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, exists, json, runCli, type RunResult } from './helpers.js';

const FIRST = 'first passphrase: ünïcode & spaces';
const SECOND = 'second passphrase, longer than the first';
const THIRD = 'third one from a file';
const WRONG = 'definitely-not-the-passphrase';

describe('passphrases', () => {
  let server: TestServer;
  let work: string;
  let apiKey: string;
  let backupId: string;
  const outputs: RunResult[] = [];
  const run = async (args: string[], env: Record<string, string | undefined>) => {
    const result = await runCli(args, { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_KDF: 'min', ...env });
    outputs.push(result);
    return result;
  };

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    ({ apiKey } = await server.newKey({ plan: 'free' }));
    work = tempDir('coffer-passphrase-');
    await fsp.mkdir(path.join(work, 'source/docs'), { recursive: true });
    await fsp.writeFile(path.join(work, 'source/docs/letter.txt'), 'dear diary\n');
    await fsp.writeFile(path.join(work, 'first.pass'), `${FIRST}\n`); // one trailing newline is not part of it
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('init reads --passphrase-file; backup reads COFFER_PASSPHRASE (the same passphrase)', async () => {
    expect((await run(['init', '--passphrase-file', path.join(work, 'first.pass')], {})).code).toBe(0);
    const backup = await run(['backup', path.join(work, 'source'), '--json'], { COFFER_PASSPHRASE: FIRST });
    backupId = json(backup).id;
  });

  it('a wrong passphrase fails with exit 4 and writes nothing', async () => {
    const target = path.join(work, 'wrong');
    const result = await run(['restore', backupId, target], { COFFER_PASSPHRASE: WRONG });
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/wrong passphrase/);
    expect(exists(target)).toBe(false);
    const rotate = await run(['passphrase'], { COFFER_PASSPHRASE: WRONG, COFFER_NEW_PASSPHRASE: SECOND });
    expect(rotate.code).toBe(4);
  });

  it('coffer passphrase re-wraps the master key: the new one restores, the old one no longer does', async () => {
    const before = json(await run(['passphrase', '--json'], { COFFER_PASSPHRASE: FIRST, COFFER_NEW_PASSPHRASE: SECOND }));
    expect(before).toMatchObject({ rotated: true, initialized: true, cryptoVersion: 'v1' });

    const old = await run(['restore', backupId, path.join(work, 'old')], { COFFER_PASSPHRASE: FIRST });
    expect(old.code).toBe(4);
    expect(exists(path.join(work, 'old'))).toBe(false);

    const fresh = await run(['restore', backupId, path.join(work, 'new')], { COFFER_PASSPHRASE: SECOND });
    expect(fresh.code, fresh.stderr).toBe(0);
    expect(await fsp.readFile(path.join(work, 'new/docs/letter.txt'), 'utf8')).toBe('dear diary\n');
  });

  it('takes the new passphrase from --new-passphrase-file, the current one from --passphrase-file', async () => {
    await fsp.writeFile(path.join(work, 'second.pass'), SECOND);
    await fsp.writeFile(path.join(work, 'third.pass'), `${THIRD}\r\n`);
    const rotated = await run(
      ['passphrase', '--passphrase-file', path.join(work, 'second.pass'), '--new-passphrase-file', path.join(work, 'third.pass')],
      { COFFER_PASSPHRASE: WRONG }, // the file wins over the environment
    );
    expect(rotated.code, rotated.stderr).toBe(0);
    // The same master key is re-wrapped: the note must not claim more than that.
    expect(rotated.stdout).not.toMatch(/no longer works/);
    expect(rotated.stderr).toMatch(/copy of the old vault envelope[\s\S]*coffer rekey/);
    const restored = await run(['restore', backupId, path.join(work, 'third')], { COFFER_PASSPHRASE: THIRD });
    expect(restored.code, restored.stderr).toBe(0);
  });

  it('a passphrase file loses exactly one line ending at its end (docs/crypto.md §1); anything else is part of it', async () => {
    const cases: [string, number][] = [
      [`${THIRD}\n`, 0],
      [`${THIRD}\r\n`, 0],
      [THIRD, 0],
      [`${THIRD}\n\n`, 4], // a second newline stays
      [`${THIRD}\r`, 4], // a lone CR is no line ending
      [`${THIRD} \n`, 4], // trailing white space stays
      [` ${THIRD}`, 4],
    ];
    for (const [i, [text, code]] of cases.entries()) {
      const file = path.join(work, `newline-${i}.pass`);
      await fsp.writeFile(file, text);
      const result = await run(['recipient', '--passphrase-file', file], {});
      expect(result.code, JSON.stringify(text)).toBe(code);
      if (code === 4) expect(result.stderr).toMatch(/wrong passphrase/);
    }
  });

  it('without a passphrase source and without a terminal: exit 2 with the ways to give one', async () => {
    const result = await run(['restore', backupId, path.join(work, 'none')], {});
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/COFFER_PASSPHRASE.*--passphrase-file.*terminal/);
    const rotate = await run(['passphrase'], { COFFER_PASSPHRASE: THIRD });
    expect(rotate.code).toBe(2);
    expect(rotate.stderr).toMatch(/COFFER_NEW_PASSPHRASE/);
    await fsp.writeFile(path.join(work, 'empty.pass'), '\n');
    expect((await run(['restore', backupId, path.join(work, 'none'), '--passphrase-file', path.join(work, 'empty.pass')], {})).code).toBe(
      2,
    );
  });

  it('has no --passphrase option (argv is visible to other users): exit 2', async () => {
    const result = await run(['restore', backupId, path.join(work, 'argv'), '--passphrase', THIRD], {});
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/unknown option '--passphrase'/);
  });

  it('never printed a passphrase, on success or failure', () => {
    expect(outputs.length).toBeGreaterThan(8);
    for (const { stdout, stderr } of outputs) {
      for (const secret of [FIRST, SECOND, THIRD, WRONG]) {
        expect(stdout).not.toContain(secret);
        expect(stderr).not.toContain(secret);
      }
    }
  });
});

describe('usage and configuration errors', () => {
  let server: TestServer;
  let apiKey: string;
  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    ({ apiKey } = await server.newKey({ plan: 'free' }));
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('every client command has --help (exit 0)', async () => {
    const commands = ['init', 'backup', 'list', 'show', 'restore', 'delete', 'watch', 'passphrase', 'rekey', 'kit', 'recover', 'reset'];
    const results = await Promise.all(commands.map((command) => runCli([command, '--help'], {})));
    results.forEach((result, i) => {
      expect(result.code, commands[i]).toBe(0);
      expect(result.stdout).toContain(`Usage: coffer ${commands[i]}`);
    });
  });

  it('missing COFFER_API_KEY, a bad COFFER_URL, a bad --kdf, a missing argument: exit 2', async () => {
    const [noKey, badUrl, badKdf, missing, noSource] = await Promise.all([
      runCli(['list'], { COFFER_URL: server.url }),
      runCli(['list'], { COFFER_URL: 'ftp://example.org', COFFER_API_KEY: apiKey }),
      runCli(['init', '--kdf', 'bogus'], { COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: 'x' }),
      runCli(['restore', '0190aaaa-0000-7000-8000-000000000000'], { COFFER_URL: server.url, COFFER_API_KEY: apiKey }),
      runCli(['backup', '/nonexistent/coffer-source'], { COFFER_URL: server.url, COFFER_API_KEY: apiKey }),
    ]);
    expect([noKey.code, badUrl.code, badKdf.code, missing.code, noSource.code]).toEqual([2, 2, 2, 2, 2]);
    expect(noSource.stderr).toMatch(/cannot back up \/nonexistent\/coffer-source: no such file or directory/);
    expect(noKey.stderr).toMatch(/COFFER_API_KEY is not set/);
    expect(badUrl.stderr).toMatch(/COFFER_URL/);
    expect(badKdf.stderr).toMatch(/unknown key-derivation profile "bogus"/);
  });

  it('an invalid setting in the environment: exit 2 with one line naming the variable', async () => {
    const env = { COFFER_URL: server.url, COFFER_API_KEY: apiKey };
    const [badKdf, badLimit] = await Promise.all([
      runCli(['list'], { ...env, COFFER_KDF: 'bogus' }),
      runCli(['list'], { ...env, COFFER_MAX_ARCHIVE_BYTES: '50MiB' }),
    ]);
    expect([badKdf.code, badKdf.stdout, badKdf.stderr]).toEqual([
      2,
      '',
      'coffer: invalid configuration: COFFER_KDF: must be one of min, interactive, moderate, sensitive, got "bogus"\n',
    ]);
    expect([badLimit.code, badLimit.stdout, badLimit.stderr]).toEqual([
      2,
      '',
      'coffer: invalid configuration: COFFER_MAX_ARCHIVE_BYTES: expected a whole number, got "50MiB"\n',
    ]);
  });

  it('server-side refusals and an unreachable server: exit 1 with the reason', async () => {
    const cli = cliFor(server.url, apiKey, 'p');
    const [unknown, badKey, unreachable, noVault] = await Promise.all([
      cli(['show', '0190aaaa-0000-7000-8000-000000000000']),
      runCli(['list'], { COFFER_URL: server.url, COFFER_API_KEY: 'cfk_wrong' }),
      runCli(['list'], { COFFER_URL: 'http://127.0.0.1:9', COFFER_API_KEY: apiKey }),
      cli(['backup', '.']),
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no such backup: check the id/);
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toMatch(/refused the API key/);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9/);
    expect(noVault.code).toBe(1);
    expect(noVault.stderr).toMatch(/not initialized; run `coffer init`/);
  });
});
