/**
 * The extractor's entry policy on its own (src/client/extract-policy.ts): for each sequence of tar entries, what
 * it asks to be created (in order), what it records, and what it refuses, with no file system and no tar stream.
 * extractInto() runs this policy on every entry (test/client/hostile-restore.test.ts and select.test.ts check the
 * same rules through real archives).
 */
import { describe, expect, it, vi } from 'vitest';
import { EntryPolicy, type PolicyEntry, segments, UnsafeArchiveError } from '../../src/client/extract-policy.js';
import { IntegrityError } from '../../src/client/envelope.js';

const T = new Date('2030-01-02T03:04:05Z');

function run(entries: PolicyEntry[], select?: (relative: string, isDirectory: boolean) => boolean) {
  const log: string[] = [];
  const files: string[] = [];
  const policy = new EntryPolicy(
    {
      mkdir: (parts, shown, mode) => log.push(`mkdir ${parts.join('/')} ${mode.toString(8)} (${shown})`),
      symlink: (parts, target, entry) => log.push(`symlink ${parts.join('/')} -> ${target} (${entry.path})`),
      link: (parts, target, shown) => log.push(`link ${parts.join('/')} => ${target.join('/')} (${shown})`),
    },
    select,
  );
  for (const entry of entries) {
    const content = policy.admit(entry);
    if (content) {
      files.push(content.join('/'));
      log.push(`file ${content.join('/')}`);
    }
  }
  return { log, files, policy };
}

/** The refusal of the last entry (every earlier one must pass). */
function refusal(entries: PolicyEntry[], select?: (relative: string, isDirectory: boolean) => boolean): string {
  const policy = run(entries.slice(0, -1), select).policy;
  try {
    policy.admit(entries.at(-1)!);
  } catch (error) {
    expect(error).toBeInstanceOf(UnsafeArchiveError);
    expect(error).toBeInstanceOf(IntegrityError);
    return (error as Error).message;
  }
  throw new Error('not refused');
}

const dir = (path: string, more: Partial<PolicyEntry> = {}): PolicyEntry => ({ path, type: 'Directory', ...more });
const file = (path: string, more: Partial<PolicyEntry> = {}): PolicyEntry => ({ path, type: 'File', ...more });
const sym = (path: string, linkpath: string): PolicyEntry => ({ path, type: 'SymbolicLink', linkpath });
const hard = (path: string, linkpath: string): PolicyEntry => ({ path, type: 'Link', linkpath });

describe('segments', () => {
  it('splits on runs of slashes and drops "." and empty parts', () => {
    expect(segments('a//b/./c/', 'path')).toEqual(['a', 'b', 'c']);
    expect(segments('./', 'path')).toEqual([]);
    expect(segments('.', 'path')).toEqual([]);
    expect(segments('a..b/..c/d..', 'path')).toEqual(['a..b', '..c', 'd..']);
  });

  it('refuses NUL bytes, absolute paths and ".." with the field named', () => {
    expect(() => segments('a\0b', 'path')).toThrow('refusing archive entry with a NUL byte in its path');
    expect(() => segments('/etc/passwd', 'hard link target')).toThrow(
      'refusing archive entry with an absolute hard link target: "/etc/passwd"',
    );
    expect(() => segments('a/../../b', 'path')).toThrow('refusing archive entry whose path leaves the target directory: "a/../../b"');
    expect(() => segments('..', 'path')).toThrow(UnsafeArchiveError);
    expect(() => segments('a/..', 'path')).toThrow(UnsafeArchiveError);
  });

  it('on POSIX, a backslash and a drive letter are ordinary characters of a name', () => {
    if (process.platform === 'win32') return;
    expect(segments('a\\b/c', 'path')).toEqual(['a\\b', 'c']);
    expect(segments('\\x', 'path')).toEqual(['\\x']);
    expect(segments('C:x', 'path')).toEqual(['C:x']);
  });

  it('on Windows, a backslash separates too, and backslash-rooted and drive-letter paths are absolute', async () => {
    // The platform is read when the module loads (the separators) and on each call (the absolute forms): load a
    // fresh copy of the module while Node says win32.
    const platform = Object.getOwnPropertyDescriptor(process, 'platform')!;
    Object.defineProperty(process, 'platform', { ...platform, value: 'win32' });
    try {
      vi.resetModules();
      const win = await import('../../src/client/extract-policy.js');
      expect(win.segments('a\\b//c\\\\d/.\\e', 'path')).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(() => win.segments('a\\..\\..\\b', 'path')).toThrow('refusing archive entry whose path leaves the target directory');
      expect(() => win.segments('\\x', 'path')).toThrow('refusing archive entry with an absolute path: "\\\\x"');
      expect(() => win.segments('C:x', 'hard link target')).toThrow('refusing archive entry with an absolute hard link target: "C:x"');
      expect(() => win.segments('z:\\x', 'path')).toThrow(/absolute path/);
      // Not absolute: a colon later in the name, a digit before it, a backslash at the end (a separator there).
      expect(win.segments('ab:c', 'path')).toEqual(['ab:c']);
      expect(win.segments('1:x', 'path')).toEqual(['1:x']);
      expect(win.segments('x\\', 'path')).toEqual(['x']);
    } finally {
      Object.defineProperty(process, 'platform', platform);
      vi.resetModules();
    }
  });
});

describe('EntryPolicy: what is made', () => {
  it('files, directories and missing parents, in archive order, with the modes the extractor uses', () => {
    const { log, files, policy } = run([dir('a/'), file('a/x'), file('b/c/y'), dir('b/c'), file('./z')]);
    expect(log).toEqual(['mkdir a 700 (a/)', 'file a/x', 'mkdir b 755 (b/c/y)', 'mkdir b/c 755 (b/c/y)', 'file b/c/y', 'file z']);
    expect(files).toEqual(['a/x', 'b/c/y', 'z']);
    expect(policy.entries).toBe(5);
    expect([...policy.made.entries()]).toEqual([
      ['', { kind: 'directory' }],
      ['a', { kind: 'directory' }],
      ['a/x', { kind: 'file' }],
      ['b', { kind: 'directory' }],
      ['b/c', { kind: 'directory' }],
      ['b/c/y', { kind: 'file' }],
      ['z', { kind: 'file' }],
    ]);
  });

  it("keeps each directory entry's archived attributes (the last one wins), masked to the permission bits", () => {
    const { policy } = run([
      dir('a', { mode: 0o40750, mtime: T, uid: 7, gid: 8 }),
      dir('a', { mode: 0o1777, mtime: T, uid: 9, gid: 10 }),
      dir('b'),
    ]);
    expect(policy.directories.get('a')).toEqual({ path: 'a', mode: 0o1777, mtime: T, uid: 9, gid: 10 });
    const b = policy.directories.get('b')!;
    expect(b.mode).toBe(0o755);
    expect(b.mtime).toBeInstanceOf(Date);
    expect(policy.entries).toBe(3);
    expect(policy.directories.has('')).toBe(false);
  });

  it('a missing parent made on the way has no archived attributes to place', () => {
    const { policy } = run([dir('a/'), file('b/c/y'), dir('b/c', { mode: 0o750 })]);
    expect([...policy.directories.keys()]).toEqual(['a', 'b/c']);
  });

  it('a repeated directory is created once; a parent made earlier is not made again', () => {
    expect(run([dir('a'), dir('a'), file('a/b'), dir('a/c'), file('a/c/d')]).log).toEqual([
      'mkdir a 700 (a)',
      'file a/b',
      'mkdir a/c 700 (a/c)',
      'file a/c/d',
    ]);
  });

  it('skips devices, FIFOs and the archive root without recording them', () => {
    const { log, policy } = run([
      { path: 'dev', type: 'CharacterDevice' },
      { path: 'blk', type: 'BlockDevice' },
      { path: 'fifo', type: 'FIFO' },
      dir('./'),
      file('dev'),
    ]);
    expect(log).toEqual(['file dev']);
    expect(policy.entries).toBe(1);
    expect(policy.made.size).toBe(2);
  });

  it('restores every regular file type, symlinks verbatim, and hard links to earlier files', () => {
    const { log } = run([
      { path: 'old', type: 'OldFile' },
      { path: 'contig', type: 'ContiguousFile' },
      sym('s', '/etc/passwd'),
      sym('t', '../../outside'),
      hard('h', 'old'),
    ]);
    expect(log).toEqual(['file old', 'file contig', 'symlink s -> /etc/passwd (s)', 'symlink t -> ../../outside (t)', 'link h => old (h)']);
  });

  it('a hard link to a symlink is a copy of the symlink, never a link through it', () => {
    const { log, policy } = run([sym('s', 'target'), hard('d/h', 's'), file('x'), hard('d/h2', './x')]);
    expect(log).toEqual(['symlink s -> target (s)', 'mkdir d 755 (d/h)', 'symlink d/h -> target (d/h)', 'file x', 'link d/h2 => x (d/h2)']);
    expect(policy.made.get('d/h')).toEqual({ kind: 'symlink', target: 'target' });
    expect(policy.made.get('d/h2')).toEqual({ kind: 'file' });
    // A copied symlink is a symlink: nothing may be written below it either.
    expect(refusal([sym('s', 'target'), hard('h', 's'), file('h/x')])).toMatch(/through a symlink/);
  });

  it('a hard link is a file: nothing may be written below it, and it cannot be replaced', () => {
    expect(refusal([file('x'), hard('h', 'x'), file('h/y')])).toBe('refusing archive entry below a file: "h/y"');
    expect(refusal([file('x'), hard('h', 'x'), dir('h')])).toBe('refusing archive entry that replaces an earlier entry: "h"');
  });
});

describe('EntryPolicy: what is refused', () => {
  it('paths and hard link targets that leave the tree, absolute ones, NUL bytes, and entries without a name', () => {
    expect(refusal([file('../x')])).toBe('refusing archive entry whose path leaves the target directory: "../x"');
    expect(refusal([file('/x')])).toBe('refusing archive entry with an absolute path: "/x"');
    expect(refusal([file('a\0')])).toBe('refusing archive entry with a NUL byte in its path');
    expect(refusal([file('x'), hard('h', '../x')])).toBe(
      'refusing archive entry whose hard link target leaves the target directory: "../x"',
    );
    expect(refusal([file('x'), hard('h', '/x')])).toBe('refusing archive entry with an absolute hard link target: "/x"');
    expect(refusal([file('./')])).toBe('refusing archive entry without a name: "./"');
    expect(refusal([sym('.', 'x')])).toBe('refusing archive entry without a name: "."');
    // The path is checked before the type: a device with a bad path is refused too.
    expect(refusal([{ path: '../dev', type: 'CharacterDevice' }])).toMatch(/leaves the target directory/);
  });

  it('anything below a symlink or a file of the archive, at any depth', () => {
    expect(refusal([sym('s', '/tmp'), file('s/x')])).toBe('refusing archive entry that would be written through a symlink: "s/x"');
    expect(refusal([dir('a'), sym('a/s', '/tmp'), dir('a/s/b/c')])).toBe(
      'refusing archive entry that would be written through a symlink: "a/s/b/c"',
    );
    expect(refusal([file('f'), dir('f/d')])).toBe('refusing archive entry below a file: "f/d"');
    expect(refusal([dir('a'), file('a/f'), file('a/f/g/h')])).toBe('refusing archive entry below a file: "a/f/g/h"');
  });

  it('an entry replacing an earlier one, except a directory repeated as a directory', () => {
    expect(refusal([file('x'), file('x')])).toBe('refusing archive entry that replaces an earlier entry: "x"');
    expect(refusal([dir('x'), file('x')])).toBe('refusing archive entry that replaces an earlier entry: "x"');
    expect(refusal([file('x'), dir('x')])).toBe('refusing archive entry that replaces an earlier entry: "x"');
    expect(refusal([sym('x', 't'), sym('x', 't')])).toBe('refusing archive entry that replaces an earlier entry: "x"');
    expect(refusal([dir('x'), sym('x', 't')])).toBe('refusing archive entry that replaces an earlier entry: "x"');
    expect(refusal([file('a/b'), file('a')])).toBe('refusing archive entry that replaces an earlier entry: "a"');
  });

  it('empty or NUL-bearing symlink targets', () => {
    expect(refusal([sym('s', '')])).toBe('refusing archive entry with an empty or NUL-bearing symlink target: "s"');
    expect(refusal([{ path: 's', type: 'SymbolicLink' }])).toBe('refusing archive entry with an empty or NUL-bearing symlink target: "s"');
    expect(refusal([sym('s', 'a\0b')])).toBe('refusing archive entry with an empty or NUL-bearing symlink target: "s"');
  });

  it('hard links to nothing earlier, to a directory, or through a symlink or a file', () => {
    expect(refusal([hard('h', 'later'), file('later')].slice(0, 1))).toBe(
      'refusing archive entry whose hard link target is not an earlier entry of the archive: "later"',
    );
    // No target at all names the archive root: a directory.
    expect(refusal([{ path: 'h', type: 'Link' }])).toBe('refusing archive entry that is a hard link to a directory: "h"');
    expect(refusal([dir('d'), hard('h', 'd')])).toBe('refusing archive entry that is a hard link to a directory: "h"');
    expect(refusal([hard('h', '.')])).toBe('refusing archive entry that is a hard link to a directory: "h"');
    // The target's parents are resolved like any path, never created: a missing one is not an earlier entry.
    expect(refusal([hard('h', 'no/such')])).toBe(
      'refusing archive entry whose hard link target is not an earlier entry of the archive: "no/such"',
    );
    expect(refusal([sym('s', '/etc'), hard('h', 's/passwd')])).toBe(
      'refusing archive entry that would be written through a symlink: "s/passwd"',
    );
    expect(refusal([file('f'), hard('h', 'f/x')])).toBe('refusing archive entry below a file: "f/x"');
    const { log } = run([dir('a'), file('a/x'), hard('h', 'a/x')]);
    expect(log).toEqual(['mkdir a 700 (a)', 'file a/x', 'link h => a/x (h)']);
  });

  it('a hard link to a target below a missing directory asks for nothing to be made', () => {
    const { log, policy } = run([file('x')]);
    expect(() => policy.admit(hard('h', 'no/such/file'))).toThrow(
      'refusing archive entry whose hard link target is not an earlier entry of the archive: "no/such/file"',
    );
    expect(log).toEqual(['file x']);
    expect(policy.made.has('no')).toBe(false);
  });

  it('a refusal after a missing parent was made has already asked for that parent (the extractor writes up to the failure)', () => {
    const made: string[] = [];
    const policy = new EntryPolicy(
      { mkdir: (parts) => made.push(parts.join('/')), symlink: () => made.push('symlink'), link: () => made.push('link') },
      (relative) => relative !== 'a/s',
    );
    policy.admit(sym('a/s', '/tmp')); // left out, but recorded: a symlink
    expect(() => policy.admit(file('a/s/x'))).toThrow('refusing archive entry that would be written through a symlink: "a/s/x"');
    expect(made).toEqual(['a']);
    expect(policy.made.get('a')).toEqual({ kind: 'directory' });
  });
});

describe('EntryPolicy: a partial restore', () => {
  const only =
    (...keep: string[]) =>
    (relative: string) =>
      keep.some((k) => relative === k || relative.startsWith(`${k}/`));

  it('asks the selection with the key and whether the entry is a directory', () => {
    const asked: [string, boolean][] = [];
    run([dir('./a/'), file('a//b'), sym('c', 't'), dir('./')], (relative, isDirectory) => {
      asked.push([relative, isDirectory]);
      return true;
    });
    expect(asked).toEqual([
      ['a', true],
      ['a/b', false],
      ['c', false],
    ]);
  });

  it('writes only the selected entries, making the left-out directories above them with their archived attributes', () => {
    const { log, policy } = run(
      [
        dir('a', { mode: 0o750, mtime: T, uid: 1, gid: 2 }),
        file('a/x'),
        dir('a/keep', { mode: 0o711, mtime: T }),
        file('a/keep/y'),
        file('z'),
      ],
      only('a/keep'),
    );
    expect(log).toEqual(['mkdir a 755 (a/keep)', 'mkdir a/keep 700 (a/keep)', 'file a/keep/y']);
    expect(policy.entries).toBe(2);
    expect(policy.directories.get('a')).toEqual({ path: 'a', mode: 0o750, mtime: T, uid: 1, gid: 2 });
    expect(policy.directories.get('a/keep')).toMatchObject({ mode: 0o711 });
    expect(policy.unselected.has('a')).toBe(true);
    expect(policy.made.get('a/x')).toEqual({ kind: 'file', skipped: true });
    expect(policy.made.get('z')).toEqual({ kind: 'file', skipped: true });
    expect(policy.made.get('a')).toEqual({ kind: 'directory' });
  });

  it('a left-out directory that is never needed is not made and its attributes are not placed', () => {
    const { log, policy } = run([dir('a', { mode: 0o700 }), dir('a', { mode: 0o750 }), file('a/x'), file('b')], only('b'));
    expect(log).toEqual(['file b']);
    expect(policy.directories.size).toBe(0);
    expect(policy.unselected.get('a')).toMatchObject({ path: 'a', mode: 0o750 });
    expect(policy.made.get('a')).toEqual({ kind: 'directory', skipped: true });
  });

  it('a written directory repeated outside the selection updates its attributes', () => {
    let calls = 0;
    const { policy } = run([dir('a', { mode: 0o700 }), dir('a', { mode: 0o751, mtime: T })], () => calls++ === 0);
    expect(policy.directories.get('a')).toMatchObject({ mode: 0o751, mtime: T });
    expect(policy.unselected.size).toBe(0);
    expect(policy.made.get('a')).toEqual({ kind: 'directory' });
  });

  it('a left-out directory keeps a default mode and a time', () => {
    const { policy } = run([dir('a', { mode: 0o40755 | 0o1000 })], () => false);
    expect(policy.unselected.get('a')).toMatchObject({ mode: 0o1755 });
    const { policy: bare } = run([dir('a')], () => false);
    expect(bare.unselected.get('a')!.mode).toBe(0o755);
    expect(bare.unselected.get('a')!.mtime).toBeInstanceOf(Date);
  });

  it('left-out entries are checked like written ones', () => {
    const none = () => false;
    expect(refusal([sym('s', '/tmp'), file('s/x')], none)).toBe('refusing archive entry that would be written through a symlink: "s/x"');
    expect(refusal([file('f'), file('f/x')], none)).toBe('refusing archive entry below a file: "f/x"');
    expect(refusal([dir('d'), sym('d/s', '/'), dir('d/s/e/f')], none)).toBe(
      'refusing archive entry that would be written through a symlink: "d/s/e/f"',
    );
    expect(refusal([file('x'), file('x')], none)).toBe('refusing archive entry that replaces an earlier entry: "x"');
    expect(refusal([file('x'), dir('x')], none)).toBe('refusing archive entry that replaces an earlier entry: "x"');
    expect(refusal([dir('x'), file('x')], none)).toBe('refusing archive entry that replaces an earlier entry: "x"');
    expect(refusal([sym('s', '')], none)).toBe('refusing archive entry with an empty or NUL-bearing symlink target: "s"');
    expect(refusal([{ path: 's', type: 'SymbolicLink' }], none)).toMatch(/empty or NUL-bearing/);
    expect(refusal([sym('s', 'a\0')], none)).toMatch(/empty or NUL-bearing/);
    expect(refusal([hard('h', 'nothing')], none)).toBe(
      'refusing archive entry whose hard link target is not an earlier entry of the archive: "nothing"',
    );
    expect(refusal([{ path: 'h', type: 'Link' }], none)).toBe('refusing archive entry that is a hard link to a directory: "h"');
    expect(refusal([dir('d'), hard('h', 'd')], none)).toBe('refusing archive entry that is a hard link to a directory: "h"');
    expect(refusal([file('x'), hard('h', '../x')], none)).toMatch(/hard link target leaves the target directory/);
    // What was left out still rules what follows, selected or not.
    expect(refusal([sym('s', '/tmp'), file('s/x')], only('s/x'))).toBe(
      'refusing archive entry that would be written through a symlink: "s/x"',
    );
    expect(refusal([file('f'), file('f/x')], only('f/x'))).toBe('refusing archive entry below a file: "f/x"');
    expect(refusal([file('x'), file('x')], only('x'))).toBe('refusing archive entry that replaces an earlier entry: "x"');
  });

  it('records left-out symlinks and hard links by what they are', () => {
    const { policy } = run([file('f'), sym('s', 't'), hard('hf', 'f'), hard('hs', 's'), { path: 'dev', type: 'FIFO' }], () => false);
    expect(policy.made.get('s')).toEqual({ kind: 'symlink', target: 't', skipped: true });
    expect(policy.made.get('hf')).toEqual({ kind: 'file', skipped: true });
    expect(policy.made.get('hs')).toEqual({ kind: 'symlink', target: 't', skipped: true });
    expect(policy.made.has('dev')).toBe(false);
    expect(policy.entries).toBe(0);
    // A left-out hard link to a file in a directory is found by its whole path.
    expect(run([dir('d'), file('d/f'), hard('h', 'd/f')], () => false).policy.made.get('h')).toEqual({ kind: 'file', skipped: true });
    expect(refusal([sym('s', 't'), hard('hs', 's'), file('hs/x')], only('hs/x'))).toMatch(/through a symlink/);
  });

  it('a selected hard link to a left-out file is reported as skipped, not written; to a left-out symlink it is a copy', () => {
    const { log, policy } = run([dir('d'), file('d/f'), hard('h', 'd/f'), sym('s', 'target'), hard('hs', 's')], only('h', 'hs'));
    expect(log).toEqual(['symlink hs -> target (hs)']);
    expect(policy.entries).toBe(1);
    expect(policy.skipped).toEqual([{ path: 'h', reason: 'a hard link to d/f, which the selection leaves out (include it too)' }]);
    expect(policy.made.has('h')).toBe(false);
    // Written selected files are linked as usual.
    expect(run([file('f'), hard('h', 'f')], only('f', 'h')).log).toEqual(['file f', 'link h => f (h)']);
  });

  it('a selected hard link whose target lies in a left-out directory makes that directory, but never a missing one', () => {
    const { log, policy } = run([dir('d', { mode: 0o750 }), sym('d/s', 'x'), hard('h', 'd/s')], only('h'));
    expect(log).toEqual(['mkdir d 755 (d/s)', 'symlink h -> x (h)']);
    expect(policy.directories.get('d')).toMatchObject({ mode: 0o750 });
    expect(refusal([dir('d'), hard('h', 'd/missing')], only('h'))).toBe(
      'refusing archive entry whose hard link target is not an earlier entry of the archive: "d/missing"',
    );
  });
});
