/**
 * The backup's tar writer (packTree) against the readers that matter: GNU tar extracts what it writes with every
 * kind of entry a backup holds, its bytes are those node-tar's packer wrote before (so archives made either way
 * read the same), the scan's size bound holds, and a file that changes while it is read fails the pack.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import * as tar from 'tar';
import { beforeAll, describe, expect, it } from 'vitest';
import { packTree } from '../../src/client/archive.js';
import { scanTree, type TreeScan } from '../../src/client/scan.js';
import { SourceReadError } from '../../src/client/fs-errors.js';
import { tempDir } from '../helpers/tmp.js';
import { lacking } from '../helpers/required.js';

const MiB = 1024 * 1024;
const gnuTar = /GNU tar/.test(spawnSync('tar', ['--version']).stdout?.toString() ?? '');
const noGnuTar = lacking(gnuTar, 'gnu-tar');
const root = process.getuid?.() === 0;
const MTIME = new Date('2011-01-01T00:00:00Z');
/** Later than any mtime or ctime here, so reading an entry (relatime) never moves its atime between two packs. */
const ATIME = new Date('2031-01-01T00:00:00Z');

async function collect(chunks: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts);
}

interface Seen {
  type: string;
  mode: number;
  mtimeS: number;
  size?: number;
  sha?: string;
  target?: string;
  uid?: number;
  gid?: number;
}

/** Every entry below `dir`: type, mode, mtime (seconds), content digest or link target, owner when asked. */
function describeTree(dir: string, owners: boolean): Map<string, Seen> {
  const seen = new Map<string, Seen>();
  const walk = (rel: string) => {
    const full = path.join(dir, rel);
    const stat = fs.lstatSync(full);
    const entry: Seen = {
      type: stat.isDirectory() ? 'dir' : stat.isSymbolicLink() ? 'symlink' : 'file',
      mode: stat.isSymbolicLink() ? 0 : stat.mode & 0o7777,
      mtimeS: stat.isSymbolicLink() ? 0 : Math.floor(stat.mtimeMs / 1000),
      ...(owners ? { uid: stat.uid, gid: stat.gid } : {}),
    };
    if (stat.isFile()) {
      entry.size = stat.size;
      entry.sha = createHash('sha256').update(fs.readFileSync(full)).digest('hex');
    } else if (stat.isSymbolicLink()) entry.target = fs.readlinkSync(full);
    if (rel !== '') seen.set(rel, entry);
    if (stat.isDirectory()) for (const name of fs.readdirSync(full)) walk(rel === '' ? name : `${rel}/${name}`);
  };
  walk('');
  return seen;
}

describe('the backup tar writer', () => {
  let work: string;
  let source: string;
  const longDir = `dir-${'d'.repeat(110)}`;
  const unicode = `ünïcödé-名前-${'ß'.repeat(60)}.txt`; // > 100 bytes, not ASCII: a pax path

  beforeAll(async () => {
    work = tempDir('coffer-pack-');
    source = path.join(work, 'source');
    const file = async (rel: string, data: string | Buffer, mode = 0o644) => {
      await fsp.mkdir(path.dirname(path.join(source, rel)), { recursive: true });
      await fsp.writeFile(path.join(source, rel), data);
      await fsp.chmod(path.join(source, rel), mode);
    };
    await file('a.txt', 'hello\n');
    await file('empty.txt', '');
    await file('exactly-512', Buffer.alloc(512, 1));
    // Crosses the writer's 1 MiB chunks and is read through the thread pool (large reads).
    await file('large.bin', Buffer.from(Array.from({ length: 3 * MiB + 7 }, (_, i) => (i * 31) % 251)));
    await file('run.sh', '#!/bin/sh\n', 0o750);
    await file('private.txt', 'mine\n', 0o600);
    await file(`${longDir}/${unicode}`, 'a long, non-ASCII name\n');
    await fsp.mkdir(path.join(source, 'empty-dir/also-empty'), { recursive: true });
    await fsp.mkdir(path.join(source, 'locked-dir'));
    await fsp.symlink('a.txt', path.join(source, 'link-to-a'));
    await fsp.symlink(`missing/${'z'.repeat(200)}`, path.join(source, 'dangling-long-link'));
    await fsp.link(path.join(source, 'a.txt'), path.join(source, 'hard-a'));
    await fsp.link(path.join(source, 'a.txt'), path.join(source, `${longDir}/hard-a-again`));
    if (root) {
      await file('big-ids.txt', 'owned by ids too large for ustar\n');
      await fsp.chown(path.join(source, 'big-ids.txt'), 3_000_000, 3_000_001);
    }
    // Modes and times last: creating children changes a directory's mtime.
    await fsp.chmod(path.join(source, 'locked-dir'), 0o700);
    const all = (await fsp.readdir(source, { recursive: true }))
      .map((rel) => path.join(source, rel))
      .sort()
      .reverse();
    for (const entry of [...all, source]) await fsp.lutimes(entry, ATIME, MTIME);
  });

  it("archives the owner name it is given (the CLI passes USER) for this user's files, and none by default", async () => {
    const unamesOf = async (options: { ownerName?: string }) => {
      const scan = await scanTree(path.join(source, 'a.txt'), options);
      const archive = await collect(packTree(scan));
      expect(archive.length).toBeLessThanOrEqual(scan.tarBoundBytes);
      const file = path.join(work, `owner-${options.ownerName ?? 'none'}.tar`);
      await fsp.writeFile(file, archive);
      const unames: (string | undefined)[] = [];
      await tar.t({ file, onReadEntry: (entry) => void unames.push(entry.header.uname) });
      return unames;
    };
    expect(await unamesOf({ ownerName: 'alice' })).toEqual(['alice']);
    expect((await unamesOf({})).filter(Boolean)).toEqual([]);
  });

  it.skipIf(noGnuTar)(
    'writes an archive GNU tar extracts as the source: modes, mtimes, empty dirs, symlinks, hard links, long names',
    async () => {
      const scan = await scanTree(source);
      const archive = await collect(packTree(scan));
      expect(archive.length).toBeLessThanOrEqual(scan.tarBoundBytes);
      const file = path.join(work, 'gnu.tar');
      await fsp.writeFile(file, archive);
      const out = path.join(work, 'gnu-out');
      await fsp.mkdir(out);
      // node-tar's pax headers carry SCHILY.dev/ino/nlink, which GNU tar does not know (and says so).
      const extracted = spawnSync('tar', ['--warning=no-unknown-keyword', '-xpf', file, '-C', out, ...(root ? ['--same-owner'] : [])]);
      expect(extracted.stderr.toString()).toBe('');
      expect(extracted.status).toBe(0);

      expect(describeTree(out, root)).toEqual(describeTree(source, root));
      // Hard links come back as one inode, not copies.
      const inode = (rel: string) => fs.statSync(path.join(out, rel)).ino;
      expect(inode('hard-a')).toBe(inode('a.txt'));
      expect(inode(`${longDir}/hard-a-again`)).toBe(inode('a.txt'));
      const listing = execFileSync('tar', ['--warning=no-unknown-keyword', '-tvf', file]).toString();
      expect(listing).toMatch(/^h.* \.\/hard-a link to a\.txt$/m);
      expect(listing).toMatch(/^l.* \.\/link-to-a -> a\.txt$/m);
    },
  );

  it('writes the bytes node-tar’s packer wrote (one source and several), so old and new archives read alike', async () => {
    const nodeTar = async (scan: TreeScan) => {
      const runs: Buffer[] = [];
      for (const run of scan.roots) {
        const options = { cwd: run.cwd, portable: false, follow: false, strict: true, gzip: false, noDirRecurse: true } as const;
        runs.push(await collect(tar.c(options, run.entries) as unknown as AsyncIterable<Buffer>));
      }
      // One archive: the end blocks of all but the last run dropped (what packTree did with node-tar).
      return Buffer.concat(runs.map((run, i) => (i < runs.length - 1 ? run.subarray(0, run.length - 1024) : run)));
    };
    // Times with a fraction of a millisecond that rounds up into the next second (node-tar rounds to whole
    // milliseconds first), and one before 1970 (a pax header).
    const times = path.join(work, 'times');
    await fsp.mkdir(times);
    await fsp.writeFile(path.join(times, 'round-up.txt'), 'x');
    await fsp.utimes(path.join(times, 'round-up.txt'), 1_893_456_000.9997, 1_293_840_000.9996);
    await fsp.writeFile(path.join(times, 'before-1970.txt'), 'y');
    // fs.utimes takes no negative time; the atime stays after the ctime, so reading the file leaves it alone.
    execFileSync('touch', ['-m', '-d', '@-86400', path.join(times, 'before-1970.txt')]);
    execFileSync('touch', ['-a', '-d', '@1924992000', path.join(times, 'before-1970.txt')]);
    await fsp.utimes(times, ATIME, MTIME);
    for (const sources of [[source], [path.join(source, 'a.txt')], [path.join(source, longDir), path.join(source, 'empty-dir')], [times]]) {
      const scan = await scanTree(sources);
      const expected = await nodeTar(scan);
      const written = await collect(packTree(scan));
      expect(written.equals(expected), sources.join(' ')).toBe(true);
      expect(written.length).toBeLessThanOrEqual(scan.tarBoundBytes);
    }
  });

  it.skipIf(noGnuTar)('stores a file older than 1970 with a fraction of a second (node-tar alone throws on its time)', async () => {
    const dir = path.join(work, 'old-times');
    await fsp.mkdir(dir);
    const file = path.join(dir, 'old.txt');
    await fsp.writeFile(file, 'old\n');
    execFileSync('touch', ['-m', '-d', '@-86400.25', file]); // fs.utimes takes no negative time
    const archive = path.join(work, 'old-times.tar');
    await fsp.writeFile(archive, await collect(packTree(await scanTree(file))));
    const out = path.join(work, 'old-times-out');
    await fsp.mkdir(out);
    execFileSync('tar', ['--warning=no-unknown-keyword', '-xf', archive, '-C', out]);
    expect((await fsp.stat(path.join(out, 'old.txt'))).mtimeMs).toBe(-86_401_000);
  });

  it('fails naming a file that shrinks or grows while it is read, and one that vanished since the scan', async () => {
    const dir = path.join(work, 'changing');
    await fsp.mkdir(dir);
    const big = path.join(dir, 'big.bin');
    const cases: [string, () => Promise<void>, RegExp][] = [
      ['shrinks', () => fsp.truncate(big, MiB), /file changed while it was read/],
      ['grows', () => fsp.appendFile(big, Buffer.alloc(10)), /file changed while it was read/],
      ['vanishes', () => fsp.rm(big), /cannot read .*big\.bin: no such file or directory/],
    ];
    for (const [what, change, message] of cases) {
      await fsp.writeFile(big, Buffer.alloc(4 * MiB, 7));
      const scan = await scanTree(dir);
      const chunks = packTree(scan);
      if (what !== 'vanishes') expect((await chunks.next()).done).toBe(false); // the header and the first MiB
      await change();
      const rest = collect(chunks);
      await expect(rest, what).rejects.toThrow(SourceReadError);
      await expect(rest, what).rejects.toThrow(message);
      await expect(rest, what).rejects.toThrow(big);
    }
  });
});
