/**
 * Selecting what goes into a backup and looking inside one, through the real CLI against a real server:
 * several paths, --exclude / --exclude-file / .cofferignore (nothing excluded is read: unreadable files and a
 * FIFO that would block any reader sit among the excluded), --skip-unreadable, --stdin and a failing producer,
 * `ls`, a partial restore (hostile archives included), `verify` on a tampered blob, and zstd and gzip backups.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decompressor, zstdAvailable } from '../../src/client/compression.js';
import { openMetadata, unwrapDek, wipe } from '../../src/client/envelope.js';
import { CofferClient } from '../../src/client/sdk.js';
import { unlockVault } from '../../src/client/vault.js';
import type { Backup } from '../../src/domain/entities.js';
import { ManualClock } from '../helpers/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import {
  assertBuilt,
  canZstd,
  cliFor,
  cliForAnyUser,
  exists,
  json,
  makeTree,
  runCli,
  snapshot,
  startCli,
  tarArchive,
  treeState,
  uploadArchive,
  zstdCompress,
  type TarEntrySpec,
} from './helpers.js';
import { lacking } from '../helpers/required.js';
import { hangGuard } from '../helpers/bounds.js';

const PASSPHRASE = 'select-test passphrase';
/** A bound against hangs (a FIFO opened by mistake blocks its reader forever), not a timing check. */
const BOUND_MS = hangGuard(15_000);

/**
 * How to run the CLI so that chmod 000 really stops reads: as root, through setpriv as nobody (root reads
 * everything); as anyone else, directly. Undefined when neither works.
 */
function unprivileged(): string[] | undefined {
  if (process.getuid?.() !== 0) return [process.execPath];
  if (spawnSync('setpriv', ['--version']).status !== 0) return undefined;
  return ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', process.execPath];
}

describe('what goes into a backup, and looking inside one', () => {
  let server: TestServer;
  let clock: ManualClock;
  let work: string;
  let apiKey: string;
  let cli: ReturnType<typeof cliFor>;
  let client: CofferClient;
  let masterKey: Buffer;

  const nextSlot = () => clock.advance(31 * 60 * 1000); // pro plan: one backup per 30 minutes
  const env = () => ({ COFFER_URL: server.url, COFFER_API_KEY: apiKey, COFFER_PASSPHRASE: PASSPHRASE, COFFER_KDF: 'min', HOME: work });
  const readyIds = async () => (await client.listBackups()).backups.filter((b) => b.status === 'READY').map((b) => b.id);
  const sealed = async (id: string) => {
    const detail = await client.getBackup(id);
    const dek = unwrapDek(masterKey, id, detail);
    try {
      return openMetadata(dek, id, detail);
    } finally {
      wipe(dek);
    }
  };
  const listed = async (id: string, at?: string) =>
    json<{ entries: { path: string; type: string; size: number; mode: number; mtime: string }[] }>(
      await cli(['ls', id, ...(at ? [at] : []), '--json']),
    ).entries;

  beforeAll(async () => {
    assertBuilt();
    clock = new ManualClock();
    server = await startTestServer({ clock });
    ({ apiKey } = await server.newKey({ plan: 'pro' }));
    work = tempDir('coffer-select-');
    await fsp.chmod(work, 0o755); // the unprivileged CLI walks through it
    cli = cliFor(server.url, apiKey, PASSPHRASE);
    client = new CofferClient({ baseUrl: server.url, apiKey });
    expect((await cli(['init'])).code).toBe(0);
    ({ masterKey } = await unlockVault(client, PASSPHRASE));
  });

  afterAll(async () => {
    if (masterKey) wipe(masterKey);
    await server?.stop();
  });

  const asNobody = unprivileged();

  it.skipIf(lacking(asNobody !== undefined, 'setpriv'))(
    'honours --exclude, --exclude-file and .cofferignore, and never reads what they exclude',
    async () => {
      const root = path.join(work, 'excludes');
      const other = path.join(work, 'other-source');
      const file = async (rel: string, content = `${rel}\n`, base = root) => {
        await fsp.mkdir(path.dirname(path.join(base, rel)), { recursive: true });
        await fsp.writeFile(path.join(base, rel), content);
      };
      await file('keep.txt');
      await file('node_modules/dep/index.js');
      await file('build/out.o');
      await file('src/build/keep-me.c'); // "/build/" is anchored at the root: this one stays
      await file('logs/a.log');
      await file('logs/keep.log');
      await file('sub/.cofferignore', '# temporary files, but not the important one\n*.tmp\n!important.tmp\n');
      await file('sub/a.tmp');
      await file('sub/important.tmp');
      await file('sub/deeper/b.tmp');
      await file('elsewhere/c.tmp'); // outside sub/: its .cofferignore does not apply
      // Excluded and unreadable: a file, a whole directory, and a FIFO whose opening for reading would block.
      await file('secret.key', 'never read\n');
      await fsp.chmod(path.join(root, 'secret.key'), 0o000);
      await file('private/inner.txt', 'never read\n');
      await fsp.chmod(path.join(root, 'private'), 0o000);
      execFileSync('mkfifo', [path.join(root, 'sub/blocking.tmp')]);
      await file('one.txt', 'a second source\n', other);
      for (const dir of [root, path.join(root, 'sub'), other]) await fsp.chmod(dir, 0o755);
      const excludeFile = path.join(work, 'excludes.txt');
      await fsp.writeFile(excludeFile, '/build/\n*.log\n!keep.log\n');
      await fsp.chmod(excludeFile, 0o644);

      const args = ['backup', root, other, '--exclude', 'node_modules', '--exclude', 'secret.key', '--exclude', 'private/'];
      const result = await startCli([...args, '--exclude-file', excludeFile, '--json'], env(), {
        command: asNobody,
        cli: cliForAnyUser(),
      }).within(BOUND_MS);
      expect(result.code, result.stderr).toBe(0);
      const { id } = JSON.parse(result.stdout) as { id: string };
      nextSlot();

      const paths = (await listed(id)).map((e) => e.path).sort();
      expect(paths).toEqual(
        [
          'excludes',
          'excludes/elsewhere',
          'excludes/elsewhere/c.tmp',
          'excludes/keep.txt',
          'excludes/logs',
          'excludes/logs/keep.log',
          'excludes/src',
          'excludes/src/build',
          'excludes/src/build/keep-me.c',
          'excludes/sub',
          'excludes/sub/.cofferignore',
          'excludes/sub/deeper',
          'excludes/sub/important.tmp',
          'other-source',
          'other-source/one.txt',
        ].sort(),
      );
      const metadata = await sealed(id);
      expect(metadata.sources).toEqual([root, other]);
      // node_modules, build, logs/a.log, sub/a.tmp, sub/deeper/b.tmp, sub/blocking.tmp, secret.key, private
      expect(metadata.excludedCount).toBe(8);
      expect(metadata.skipped).toBeUndefined();

      // Several sources restore side by side under their names.
      const target = path.join(work, 'excludes-restored');
      expect((await cli(['restore', id, target])).code).toBe(0);
      expect(await fsp.readFile(path.join(target, 'other-source/one.txt'), 'utf8')).toBe('a second source\n');
      expect(exists(path.join(target, 'excludes/node_modules'))).toBe(false);
    },
  );

  it.skipIf(lacking(asNobody !== undefined, 'setpriv'))(
    'fails naming every unreadable file; --skip-unreadable backs up the rest and lists what it left out',
    async () => {
      const root = path.join(work, 'unreadable');
      await fsp.mkdir(path.join(root, 'locked-dir'), { recursive: true });
      await fsp.writeFile(path.join(root, 'ok.txt'), 'fine\n');
      await fsp.writeFile(path.join(root, 'locked.txt'), 'private\n');
      await fsp.writeFile(path.join(root, 'locked-dir/inner.txt'), 'private\n');
      execFileSync('mkfifo', [path.join(root, 'a.fifo')]);
      await fsp.chmod(path.join(root, 'locked.txt'), 0o000);
      await fsp.chmod(path.join(root, 'locked-dir'), 0o000);
      await fsp.chmod(root, 0o755);
      const before = await readyIds();

      const strict = await startCli(['backup', root], env(), { command: asNobody, cli: cliForAnyUser() }).within(BOUND_MS);
      expect(strict.code).toBe(1);
      expect(strict.stderr).toContain(`${path.join(root, 'locked.txt')}: permission denied`);
      expect(strict.stderr).toContain(`${path.join(root, 'locked-dir')}: permission denied`);
      expect(strict.stderr).toMatch(/--skip-unreadable/);
      expect(await readyIds()).toEqual(before);

      const lenient = await startCli(['backup', root, '--skip-unreadable', '--json'], env(), {
        command: asNobody,
        cli: cliForAnyUser(),
      }).within(BOUND_MS);
      expect(lenient.code, lenient.stderr).toBe(0);
      const out = JSON.parse(lenient.stdout) as { id: string; skipped: { path: string; reason: string }[] };
      nextSlot();
      const expected = [
        { path: path.join(root, 'locked-dir'), reason: 'cannot be read: permission denied' },
        { path: path.join(root, 'locked.txt'), reason: 'cannot be read: permission denied' },
        { path: path.join(root, 'a.fifo'), reason: 'a FIFO: not archived' },
      ];
      expect(out.skipped).toEqual(expected);
      expect((await sealed(out.id)).skipped).toEqual(expected);
      expect((await listed(out.id)).map((e) => e.path)).toEqual(['ok.txt']);
    },
  );

  it('backs up a pipe as one file, and fails (finalizing nothing) when the producer fails, ends at once or overflows', async () => {
    const data = randomBytes(300_000).toString('base64');
    const empty = await cli(['backup', '--stdin', '--stdin-name', 'db.sql']); // an empty standard input
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/ended before its first byte: nothing was uploaded/);

    const good = await runCli(['backup', '--stdin', '--stdin-name', 'db.sql', '--json'], env(), { input: data });
    expect(good.code, good.stderr).toBe(0);
    const { id } = JSON.parse(good.stdout) as { id: string };
    nextSlot();
    const metadata = await sealed(id);
    expect(metadata).toMatchObject({ archive: 'raw', name: 'db.sql', kind: 'file', fileCount: 1, plaintextSizeBytes: data.length });
    expect(await listed(id)).toEqual([{ path: 'db.sql', type: 'file', size: data.length, mode: 0o600, mtime: metadata.createdAt }]);
    const target = path.join(work, 'stdin-restored');
    expect((await cli(['restore', id, target])).code).toBe(0);
    expect(await fsp.readFile(path.join(target, 'db.sql'), 'utf8')).toBe(data);

    const before = await readyIds();
    const failing = await cli([
      'backup',
      '--stdin-from-command',
      '--stdin-name',
      'dump.sql',
      '--',
      'sh',
      '-c',
      'printf "partial dump"; exit 3',
    ]);
    expect(failing.code).toBe(1);
    expect(failing.stderr).toMatch(/the command "sh" exited with code 3: the backup was not finalized/);
    const killed = await cli(['backup', '--stdin-from-command', '--', 'sh', '-c', 'printf partial; kill -9 $$']);
    expect(killed.code).toBe(1);
    expect(killed.stderr).toMatch(/was killed by SIGKILL/);
    const missing = await cli(['backup', '--stdin-from-command', '--', 'no-such-command-4f1e']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot run "no-such-command-4f1e": no such file or directory/);
    // The limit holds while the stream flows: 2 MB of random bytes against a 100 kB limit.
    const overflow = await cli(['backup', '--stdin-from-command', '--', 'head', '-c', '2000000', '/dev/urandom'], {
      COFFER_MAX_ARCHIVE_BYTES: '100000',
    });
    expect(overflow.code).toBe(1);
    expect(overflow.stderr).toMatch(/exceed the .* limit.*the upload was stopped and its slot deleted/s);
    expect(await readyIds()).toEqual(before);
    const pending = (await client.listBackups()).backups.filter((b) => b.status !== 'READY');
    expect(pending).toEqual([]);

    const fromCommand = await cli(['backup', '--stdin-from-command', '--stdin-name', 'hello.txt', '--json', '--', 'printf', 'hello\\n']);
    expect(fromCommand.code, fromCommand.stderr).toBe(0);
    nextSlot();
    expect((await listed(JSON.parse(fromCommand.stdout).id)).map((e) => [e.path, e.size])).toEqual([['hello.txt', 6]]);
  });

  it('--stdin-from-command asks the server first: a refused backup never runs the command, an empty one frees its slot', async () => {
    const marker = (n: number) => path.join(work, `ran-${n}`);
    const touching = (n: number, then: string) => ['sh', '-c', `touch "${marker(n)}"; ${then}`];
    const notReady = async () => (await client.listBackups()).backups.filter((b) => b.status !== 'READY');
    const before = await readyIds();

    // Allowed, but the command writes nothing (exit 0) or fails before its first byte: the slot opened for it is freed.
    const empty = await cli(['backup', '--stdin-from-command', '--', ...touching(1, 'true')]);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(
      /the command "sh" wrote nothing to its standard output: nothing was uploaded and its upload slot was freed/,
    );
    expect(exists(marker(1))).toBe(true);
    const failed = await cli(['backup', '--stdin-from-command', '--', ...touching(2, 'exit 2')]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/the command "sh" exited with code 2: the backup was not finalized and its upload slot was freed/);
    expect(exists(marker(2))).toBe(true);
    expect(await readyIds()).toEqual(before);
    expect(await notReady()).toEqual([]);
    expect(
      JSON.parse((await cli(['list', '--json'])).stdout)
        .backups.map((b: { id: string }) => b.id)
        .sort(),
    ).toEqual([...before].sort());

    // Allowed, with output: backed up as before.
    const good = await cli(['backup', '--stdin-from-command', '--stdin-name', 'data.txt', '--json', '--', ...touching(3, 'echo data')]);
    expect(good.code, good.stderr).toBe(0);
    expect(exists(marker(3))).toBe(true);
    const { id } = JSON.parse(good.stdout) as { id: string };
    expect((await listed(id)).map((e) => [e.path, e.size])).toEqual([['data.txt', 5]]);

    // Refused (pro plan: one backup per 30 minutes, and one was just made): the command never starts.
    const refused = await cli(['backup', '--stdin-from-command', '--', ...touching(4, 'echo data')]);
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stderr).toMatch(/interval/);
    expect(exists(marker(4))).toBe(false);
    expect(await notReady()).toEqual([]);
    nextSlot();
  });

  describe('a backup of a varied tree', () => {
    let tree: string;
    let id: string;

    beforeAll(async () => {
      tree = path.join(work, 'tree');
      await makeTree(tree);
      ({ id } = json(await cli(['backup', tree, '--json'])));
      nextSlot();
    });

    it('ls lists path, type, size, mode and mtime, for all or below a path, as JSON and as text', async () => {
      const entries = await listed(id);
      const local = await snapshot(tree);
      const files = Object.entries(local).filter(([, e]) => e.type === 'file');
      for (const [rel, e] of files) {
        const entry = entries.find((x) => x.path === rel);
        expect(entry, rel).toBeDefined();
        if (entry!.type === 'hardlink') continue;
        expect(entry).toMatchObject({
          type: 'file',
          size: e.size,
          mode: e.mode,
          mtime: new Date(e.mtime! * 1000).toISOString().replace('.000Z', 'Z'),
        });
      }
      expect(entries.find((x) => x.path === 'link-to-deep')).toMatchObject({ type: 'symlink', linkTarget: 'nested/a/b/c/deep.txt' });
      expect((await listed(id, 'nested/a/b')).map((e) => e.path)).toEqual(['nested/a/b', 'nested/a/b/c', 'nested/a/b/c/deep.txt']);

      const text = await cli(['ls', id, 'nested/a/b/c']);
      expect(text.code).toBe(0);
      expect(text.stdout).toBe(
        'drwxr-xr-x   0  2012-01-01 00:00  nested/a/b/c/\n-rw-r-----  12  2019-01-01 00:00  nested/a/b/c/deep.txt\n',
      );
    });

    it('restore --include restores only the matching paths (with their parents), verified whole', async () => {
      const target = path.join(work, 'partial');
      const result = await cli(['restore', id, target, '--include', 'nested/a/b', '--include', '*.md']);
      expect(result.code, result.stderr).toBe(0);
      const restored = await snapshot(target);
      const full = await snapshot(tree);
      expect(Object.keys(restored).sort()).toEqual(
        ['nested', 'nested/a', 'nested/a/b', 'nested/a/b/c', 'nested/a/b/c/deep.txt', 'Ω≈ç√ ∂ƒ.md'].sort(),
      );
      for (const key of Object.keys(restored)) expect(restored[key], key).toEqual(full[key]); // archived modes and mtimes, parents too

      const none = await cli(['restore', id, path.join(work, 'partial-none'), '--include', 'no-such-thing']);
      expect(none.code).toBe(1);
      expect(none.stderr).toMatch(/no entry of backup .* matches --include no-such-thing: nothing was restored/);
      expect(exists(path.join(work, 'partial-none'))).toBe(false);

      // A hard link whose target the selection leaves out cannot be made: said, and the rest restored.
      // (The scan walks names in order, so nested/hard-link.txt is stored as the file and top.txt as the link.)
      const linked = await cli(['restore', id, path.join(work, 'partial-link'), '--include', 'top.txt', '--include', '*.md']);
      expect(linked.code, linked.stderr).toBe(0);
      expect(linked.stderr).toMatch(/not restored top.txt: a hard link to nested\/hard-link.txt, which the selection leaves out/);
      expect(Object.keys(await snapshot(path.join(work, 'partial-link')))).toEqual(['Ω≈ç√ ∂ƒ.md']);
    });

    it('restore --include keeps the safety rules of a full restore on hostile archives', async () => {
      const cases: { entries: (outside: string) => TarEntrySpec[]; include: string; pattern: RegExp }[] = [
        { entries: () => [{ path: '../escape.txt', body: 'x' }], include: '*.txt', pattern: /leaves the target directory/ },
        {
          entries: (outside) => [
            { path: 's', type: 'SymbolicLink', linkpath: outside },
            { path: 's/pwned.txt', body: 'pwned' },
          ],
          include: 's/pwned.txt',
          pattern: /written through a symlink: "s\/pwned.txt"/,
        },
        {
          // The symlink itself is not selected: the entry below it is still refused.
          entries: (outside) => [
            { path: 'd', type: 'SymbolicLink', linkpath: outside },
            { path: 'd/keep.txt', body: 'pwned' },
          ],
          include: '*.txt',
          pattern: /written through a symlink: "d\/keep.txt"/,
        },
        {
          entries: (outside) => [
            { path: 'a.txt', body: 'first' },
            { path: 'a.txt', type: 'SymbolicLink', linkpath: path.join(outside, 'keep.txt') },
          ],
          include: 'a.txt',
          pattern: /replaces an earlier entry: "a.txt"/,
        },
      ];
      for (const [i, c] of cases.entries()) {
        const outside = path.join(work, `hostile-${i}-outside`);
        await fsp.mkdir(outside, { recursive: true });
        await fsp.writeFile(path.join(outside, 'keep.txt'), 'keep\n');
        const before = await treeState(outside);
        const hostile = await uploadArchive(client, masterKey, tarArchive(c.entries(outside)));
        nextSlot();
        const target = path.join(work, `hostile-${i}-target`);
        const result = await cli(['restore', hostile, target, '--include', c.include]);
        expect(result.code, result.stderr).toBe(4);
        expect(result.stderr).toMatch(c.pattern);
        expect(exists(target)).toBe(false);
        expect(await treeState(outside)).toEqual(before);
      }
    });
  });

  describe('verify', () => {
    const blobFile = (backup: Backup) => path.join(server.dataDir, 'blobs', backup.blobKey!);

    it('checks backups whole (exit 0), names a tampered one (exit 4), and samples', async () => {
      const dir = path.join(work, 'verify-src');
      await fsp.mkdir(dir, { recursive: true });
      await fsp.writeFile(path.join(dir, 'data.bin'), randomBytes(200_000));
      const { id: good } = json(await cli(['backup', dir, '--json']));
      nextSlot();
      const { id: bad } = json(await cli(['backup', dir, '--json']));
      nextSlot();

      const ok = await cli(['verify', good, bad]);
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stdout).toMatch(new RegExp(`verified ${good}`));

      const file = blobFile((await server.parts.stores.backups.getBackup(bad))!);
      const bytes = await fsp.readFile(file);
      bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
      await fsp.writeFile(file, bytes);

      const one = await cli(['verify', bad]);
      expect(one.code).toBe(4);
      expect(one.stdout).toMatch(new RegExp(`FAILED   ${bad}: .*`));
      const all = await cli(['verify', '--all', '--json']);
      expect(all.code).toBe(4);
      const report = JSON.parse(all.stdout) as { results: { backupId: string; outcome: string }[]; failed: number };
      expect(report.failed).toBe(1);
      expect(report.results.find((r) => r.backupId === bad)?.outcome).toBe('failed');
      expect(report.results.find((r) => r.backupId === good)?.outcome).toBe('verified');
      expect(report.results.filter((r) => r.outcome === 'verified').length).toBe((await readyIds()).length - 1);

      // The sample is random: with the tampered byte put back, whichever backup it picks verifies.
      bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
      await fsp.writeFile(file, bytes);
      const sample = json<{ results: unknown[] }>(await cli(['verify', '--sample', '1', '--json'], {})).results;
      expect(sample).toHaveLength(1);
      expect((await cli(['verify'])).code).toBe(2);
      const unknown = await cli(['verify', '01900000-0000-7000-8000-0000000000ff']);
      expect(unknown.code).toBe(1);
      expect(unknown.stdout).toMatch(/could not verify .*no such backup/);
    });
  });

  describe('compression', () => {
    it('a gzip backup and a zstd one (this runtime’s or hand-made) restore on this Node', async () => {
      const tree = path.join(work, 'compress-src');
      await makeTree(tree);
      const { id: gz } = json(await cli(['backup', tree, '--compression', 'gzip', '--json']));
      nextSlot();
      expect((await sealed(gz)).compression).toBe('gzip');
      const gzTarget = path.join(work, 'gz-restored');
      expect((await cli(['restore', gz, gzTarget])).code).toBe(0);
      expect(await snapshot(gzTarget)).toEqual(await snapshot(tree));

      const byDefault = json(await cli(['backup', tree, '--json']));
      nextSlot();
      expect((await sealed(byDefault.id)).compression).toBe(zstdAvailable() ? 'zstd' : 'gzip');
      if (!zstdAvailable()) {
        const refused = await cli(['backup', tree, '--compression', 'zstd']);
        expect(refused.code).toBe(2);
        expect(refused.stderr).toMatch(/has no zstd compressor/);
      }
    });

    it.skipIf(lacking(canZstd(), 'zstd'))('restores a zstd backup on this Node, and the pure-JavaScript decoder matches', async () => {
      const plain = tarArchive([
        { path: 'z', type: 'Directory' },
        { path: 'z/a.txt', body: 'zstd compressed\n'.repeat(1000) },
      ]);
      const id = await uploadArchive(client, masterKey, plain, { compression: 'zstd' });
      nextSlot();
      const target = path.join(work, 'zstd-restored');
      const result = await cli(['restore', id, target]);
      expect(result.code, result.stderr).toBe(0);
      expect(await fsp.readFile(path.join(target, 'z/a.txt'), 'utf8')).toBe('zstd compressed\n'.repeat(1000));

      const big = randomBytes(3 * 1024 * 1024);
      const compressed = zstdCompress(big);
      const chunks = Array.from({ length: Math.ceil(compressed.length / 7001) }, (_, i) => compressed.subarray(i * 7001, (i + 1) * 7001));
      const out = await buffer(Readable.from(chunks).pipe(decompressor('zstd', big.length, { native: false })));
      expect(createHash('sha256').update(out).digest('hex')).toBe(createHash('sha256').update(big).digest('hex'));
    });
  });
});
