/**
 * Hostile archive sequences through the real CLI against a real server: each archive is sealed with the real
 * keys (authentic, so only the extractor stands between it and the disk) and restored next to a sibling
 * "outside" directory. Whatever the sequence, nothing outside the target may change: no file, no mode, no
 * mtime, and a refused restore leaves no staging directory behind.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wipe } from '../../src/client/envelope.js';
import { CofferClient } from '../../src/client/sdk.js';
import { unlockVault } from '../../src/client/vault.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, exists, tarArchive, treeState as state, uploadArchive, type TarEntrySpec } from './helpers.js';

const PASSPHRASE = 'hostile-restore passphrase';
const LATER = new Date('2030-03-03T03:03:03Z');

/** A sentinel directory with distinct modes and mtimes (set last: writing children changes them). */
async function makeOutside(dir: string): Promise<void> {
  await fsp.mkdir(path.join(dir, 'sub'), { recursive: true });
  await fsp.writeFile(path.join(dir, 'keep.txt'), 'keep me\n');
  await fsp.writeFile(path.join(dir, 'sub/inner.txt'), 'inner\n');
  const old = new Date('2011-01-01T00:00:00Z');
  for (const [rel, mode] of [
    ['keep.txt', 0o640],
    ['sub/inner.txt', 0o604],
    ['sub', 0o751],
    ['', 0o751],
  ] as const) {
    await fsp.chmod(path.join(dir, rel), mode);
    await fsp.utimes(path.join(dir, rel), old, old);
  }
}

describe('restore of hostile archive sequences never touches anything outside the target', () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let cli: ReturnType<typeof cliFor>;
  let client: CofferClient;
  let masterKey: Buffer;

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    const { apiKey } = await server.newKey({ plan: 'pro' });
    work = tempDir('coffer-hostile-');
    cli = cliFor(server.url, apiKey, PASSPHRASE);
    client = new CofferClient({ baseUrl: server.url, apiKey });
    expect((await cli(['init'])).code).toBe(0);
    ({ masterKey } = await unlockVault(client, PASSPHRASE));
  });

  afterAll(async () => {
    if (masterKey) wipe(masterKey);
    await server?.stop();
    if (work) await fsp.rm(work, { recursive: true, force: true });
  });

  /** Uploads `entries` (built against the case's outside directory) and restores them into a new target. */
  async function attempt(entries: (outside: string) => TarEntrySpec[], options: { plaintextSha256?: string; targetExists?: boolean } = {}) {
    const dir = await fsp.mkdtemp(path.join(work, 'case-'));
    const outside = path.join(dir, 'outside');
    const target = path.join(dir, 'target');
    await makeOutside(outside);
    if (options.targetExists) await fsp.mkdir(target);
    const before = await state(outside);
    const id = await uploadArchive(client, masterKey, tarArchive(entries(outside)), options);
    clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes
    const result = await cli(['restore', id, target]);
    expect(await state(outside)).toEqual(before);
    return { result, target, outside };
  }

  async function expectRefused(entries: (outside: string) => TarEntrySpec[], pattern: RegExp) {
    const { result, target } = await attempt(entries);
    expect(result.code, result.stderr).toBe(4);
    expect(result.stderr).toMatch(pattern);
    expect(exists(target)).toBe(false);
  }

  it('a hard link to a symlink, then an entry below the link', () =>
    expectRefused(
      (outside) => [
        { path: 's', type: 'SymbolicLink', linkpath: outside },
        { path: 'h', type: 'Link', linkpath: 's' },
        { path: 'h/pwned.txt', body: 'pwned' },
      ],
      /written through a symlink: "h\/pwned.txt"/,
    ));

  it('a hard link to a hard link to a symlink, then an entry below it', () =>
    expectRefused(
      (outside) => [
        { path: 's', type: 'SymbolicLink', linkpath: outside },
        { path: 'h1', type: 'Link', linkpath: 's' },
        { path: 'h2', type: 'Link', linkpath: 'h1' },
        { path: 'h2/sub/pwned.txt', body: 'pwned' },
      ],
      /written through a symlink: "h2\/sub\/pwned.txt"/,
    ));

  it('a directory replaced by a symlink to an outside directory (the attribute pass must not follow it)', () =>
    expectRefused(
      (outside) => [
        { path: 'd', type: 'Directory', mode: 0o777, mtime: LATER },
        { path: 'd', type: 'SymbolicLink', linkpath: outside },
      ],
      /replaces an earlier entry: "d"/,
    ));

  it('a symlink, then a directory of the same name and a file in it', () =>
    expectRefused(
      (outside) => [
        { path: 'd', type: 'SymbolicLink', linkpath: outside },
        { path: 'd', type: 'Directory', mode: 0o777, mtime: LATER },
        { path: 'd/pwned.txt', body: 'pwned' },
      ],
      /replaces an earlier entry: "d"/,
    ));

  it('a symlink climbing out with .., then a file below it', () =>
    expectRefused(
      () => [
        { path: 'up', type: 'SymbolicLink', linkpath: '../../outside' },
        { path: 'up/keep.txt', body: 'pwned' },
      ],
      /written through a symlink: "up\/keep.txt"/,
    ));

  it('a hard link whose target climbs out with ..', () =>
    expectRefused(
      () => [{ path: 'h', type: 'Link', linkpath: 'a/../../outside/keep.txt' }],
      /hard link target leaves the target directory/,
    ));

  it('a hard link through a symlink of the archive to an outside file', () =>
    expectRefused(
      (outside) => [
        { path: 's', type: 'SymbolicLink', linkpath: outside },
        { path: 'h', type: 'Link', linkpath: 's/keep.txt' },
      ],
      /written through a symlink: "s\/keep.txt"/,
    ));

  it.each([
    ['case', 'D', 'd'],
    ['Unicode normalization', '\u00e9', 'e\u0301'],
  ])('%s aliases: a symlink, then a file below its alias', async (_kind, link, alias) => {
    const { result, target } = await attempt((outside) => [
      { path: link, type: 'SymbolicLink', linkpath: outside },
      { path: `${alias}/pwned.txt`, body: 'pwned' },
    ]);
    // A case-sensitive file system holds both names (the file lands inside the target); an insensitive one
    // refuses the alias. Either way the outside directory is unchanged (checked by attempt()).
    if (result.code === 0) {
      expect((await fsp.lstat(path.join(target, alias))).isDirectory()).toBe(true);
      expect(await fsp.readFile(path.join(target, alias, 'pwned.txt'), 'utf8')).toBe('pwned');
    } else {
      expect(result.code, result.stderr).toBe(4);
      expect(result.stderr).toMatch(/alias/);
    }
  });

  it('an archive whose SHA-256 mismatches after hostile entries: refused, staging removed, nothing outside touched', async () => {
    const { result, target } = await attempt(
      (outside) => [
        { path: 's', type: 'SymbolicLink', linkpath: outside },
        { path: 'h', type: 'Link', linkpath: 's' },
        { path: 'h/pwned.txt', body: 'pwned' },
      ],
      { plaintextSha256: '0'.repeat(64), targetExists: true },
    );
    expect(result.code, result.stderr).toBe(4);
    expect(await fsp.readdir(target)).toEqual([]);
  });

  it('an archive whose SHA-256 mismatches after entries the extractor accepts: nothing placed, staging removed', async () => {
    const { result, target } = await attempt(
      (outside) => [
        { path: 'd', type: 'Directory', mode: 0o777, mtime: LATER },
        { path: 'd/link', type: 'SymbolicLink', linkpath: outside },
        { path: 'file.txt', body: 'not placed' },
      ],
      { plaintextSha256: '0'.repeat(64), targetExists: true },
    );
    expect(result.code, result.stderr).toBe(4);
    expect(result.stderr).toMatch(/does not match its metadata/);
    expect(await fsp.readdir(target)).toEqual([]);
  });

  it('legitimate links still restore: a link to a link to a file, a hard link to a symlink (as that symlink)', async () => {
    const { result, target } = await attempt((outside) => [
      { path: 'a.txt', body: 'shared' },
      { path: 'b.txt', type: 'Link', linkpath: 'a.txt' },
      { path: 'c.txt', type: 'Link', linkpath: 'b.txt' },
      { path: 's', type: 'SymbolicLink', linkpath: outside },
      { path: 'h', type: 'Link', linkpath: 's' },
      { path: 'dir', type: 'Directory', mode: 0o750, mtime: LATER },
    ]);
    expect(result.code, result.stderr).toBe(0);
    const [a, c] = await Promise.all([fsp.stat(path.join(target, 'a.txt')), fsp.stat(path.join(target, 'c.txt'))]);
    expect(c.ino).toBe(a.ino);
    expect(await fsp.readlink(path.join(target, 'h'))).toBe(await fsp.readlink(path.join(target, 's')));
    const dir = await fsp.lstat(path.join(target, 'dir'));
    expect([dir.mode & 0o7777, dir.mtimeMs]).toEqual([0o750, LATER.getTime()]);
  });
});
