/**
 * The whole client through the real CLI process against a real server: init → backup → list/show/watch →
 * restore (bytes, modes, mtimes, symlinks, hard links, empty files and directories, unicode names, 20 MiB of
 * random data) → delete; and the server's database and blob files hold none of the plaintext.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { CANARY_NAME, CANARY_TEXT, assertBuilt, cliFor, json, makeTree, readAllFiles, snapshot } from './helpers.js';

const PASSPHRASE = 'round trip passphrase ✓ 42';

describe('coffer backup → restore round trip', () => {
  let server: TestServer;
  let work: string;
  let source: string;
  let cli: ReturnType<typeof cliFor>;
  let backupId: string;

  beforeAll(async () => {
    assertBuilt();
    server = await startTestServer();
    const { apiKey } = await server.newKey({ plan: 'pro' });
    work = tempDir('coffer-roundtrip-');
    source = path.join(work, 'source');
    await makeTree(source, 20 * 1024 * 1024);
    cli = cliFor(server.url, apiKey, PASSPHRASE);
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('initializes the vault once', async () => {
    const init = json(await cli(['init', '--json']));
    expect(init).toMatchObject({ initialized: true, created: true, cryptoVersion: 'v1' });
    expect(init.kdf).toMatchObject({ opslimit: 1, memlimit: 8192 }); // COFFER_KDF=min in tests
    const again = await cli(['init']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already initialized/);
  });

  it('backs up the tree and prints the READY BackupDetail with --json', async () => {
    const result = await cli(['backup', source, '--json', '--hostapp-version', 'photos-2.1']);
    const detail = json(result);
    expect(detail).toMatchObject({ status: 'READY', cryptoVersion: 'v1', clientVersion: 'coffer-cli/0.1.0', hostappVersion: 'photos-2.1' });
    expect(detail.ciphertextSizeBytes).toBeGreaterThan(20 * 1024 * 1024);
    expect(detail.wrappedDek).toMatch(/^[A-Za-z0-9+/]+=*$/);
    expect(result.stderr).toBe(''); // not a TTY: no progress bar, no chatter
    backupId = detail.id;
  });

  it('lists, shows (with decrypted metadata) and watches it', async () => {
    const list = json(await cli(['list', '--json']));
    expect(list.backups.map((b: { id: string }) => b.id)).toEqual([backupId]);
    const human = await cli(['list']);
    expect(human.stdout).toContain(backupId);
    expect(human.stdout).toMatch(/READY/);

    const show = json(await cli(['show', backupId, '--json']));
    expect(show).toMatchObject(list.backups[0]);
    const withMetadata = await cli(['show', backupId, '--metadata']);
    expect(withMetadata.code).toBe(0);
    expect(withMetadata.stdout).toContain(`source:      ${source}`);
    expect(withMetadata.stdout).toMatch(/contents:\s+\d+ files, \d+ directories, 5 symlinks/);

    const watch = await cli(['watch', backupId, '--json']);
    expect(watch.code).toBe(0);
    const frames = watch.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(frames[0]).toMatchObject({ backupId, status: 'READY' });
    expect(frames.at(-1)).toMatchObject({ backupId, reason: 'terminal', status: 'READY' });
  });

  it('restores an identical tree: bytes, modes, mtimes, symlinks, hard links, empty entries, unicode', async () => {
    const target = path.join(work, 'restored', 'deeper'); // created (with parents) by restore
    const result = await cli(['restore', backupId, target]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/final tag and SHA-256 verified/);
    const [before, after] = await Promise.all([snapshot(source), snapshot(target)]);
    expect(Object.keys(after)).toEqual(Object.keys(before));
    expect(after).toEqual(before);
    expect(after['empty-dir']).toMatchObject({ type: 'dir' });
    expect(after['empty.txt']).toMatchObject({ type: 'file', size: 0 });
    expect(after['dangling-link']).toEqual({ type: 'symlink', mode: 0, target: 'does/not/exist' });
    expect(after['abs-link']).toEqual({ type: 'symlink', mode: 0, target: '/nonexistent/absolute/target' });
    expect(after['nested/outside-link']).toEqual({ type: 'symlink', mode: 0, target: '../../outside-of-the-tree' });
    expect(after['bin/run.sh']?.mode).toBe(0o755);
    expect(after['private']?.mode).toBe(0o700);
    expect(after['big/random.bin']?.size).toBe(20 * 1024 * 1024);
    const [a, b] = await Promise.all([fsp.stat(path.join(target, 'top.txt')), fsp.stat(path.join(target, 'nested/hard-link.txt'))]);
    expect(a.ino).toBe(b.ino);
    // no staging leftovers
    expect(fs.readdirSync(target).some((name) => name.startsWith('.coffer-restore-'))).toBe(false);
  });

  it('refuses a non-empty target without --force, merges into it with --force', async () => {
    const target = path.join(work, 'occupied');
    await fsp.mkdir(path.join(target, 'nested'), { recursive: true });
    await fsp.writeFile(path.join(target, 'keep-me.txt'), 'mine\n');
    await fsp.writeFile(path.join(target, 'top.txt'), 'old version\n');
    const refused = await cli(['restore', backupId, target]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/not empty/);
    expect(await fsp.readFile(path.join(target, 'top.txt'), 'utf8')).toBe('old version\n');

    const forced = await cli(['restore', backupId, target, '--force', '--json']);
    expect(json(forced)).toMatchObject({ id: backupId, status: 'READY' });
    expect(await fsp.readFile(path.join(target, 'top.txt'), 'utf8')).toBe('top level\n');
    expect(await fsp.readFile(path.join(target, 'keep-me.txt'), 'utf8')).toBe('mine\n');
    expect(await fsp.readFile(path.join(target, 'nested/a/b/c/deep.txt'), 'utf8')).toBe('deep inside\n');
  });

  it('leaves no plaintext on the server: no file names, contents, source path or passphrase', async () => {
    const files = await readAllFiles(server.dataDir);
    expect(files.length).toBeGreaterThan(1); // database + at least one blob
    const big = await fsp.readFile(path.join(source, 'big/random.bin'));
    const needles: [string, Buffer][] = [
      ['canary file name', Buffer.from(CANARY_NAME)],
      ['canary content', Buffer.from(CANARY_TEXT)],
      ['unicode file name', Buffer.from('文件 📁')],
      ['nested name', Buffer.from('deep.txt')],
      ['file content', Buffer.from('deep inside')],
      ['source path', Buffer.from(source)],
      ['passphrase', Buffer.from(PASSPHRASE)],
      ['random bytes (start)', big.subarray(0, 32)],
      ['random bytes (middle)', big.subarray(10 * 1024 * 1024, 10 * 1024 * 1024 + 32)],
    ];
    for (const { file, bytes } of files) {
      for (const [what, needle] of needles) {
        expect(bytes.includes(needle), `${what} found in ${file}`).toBe(false);
      }
    }
  });

  it('deletes the backup', async () => {
    const deleted = json(await cli(['delete', backupId, '--json']));
    expect(deleted).toMatchObject({ id: backupId, status: 'DELETED' });
    expect(json(await cli(['list', '--json']))).toEqual({ backups: [] });
    const gone = await cli(['show', backupId]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/no such backup/);
  });
});
