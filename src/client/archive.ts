/**
 * The plaintext side of a backup: a tar stream of a directory (or one file) and its safe extraction.
 *
 * Backup:  tar (modes, mtimes to the second, empty directories, symlinks, hard links) → gzip
 * Restore: gunzip → tar, into a private staging directory (new, 0700, made by this restore inside the target).
 *          The rules, which hold for any sequence of entries (extractInto() has the details):
 *          - no byte, mode, owner or time is applied outside staging during extraction: paths are resolved
 *            lexically against what the extractor itself created, never through a link on disk; an entry
 *            below anything but a directory it created, replacing an earlier entry, or named with `..` or an
 *            absolute path is refused; a hard link to a symlink becomes a copy of that symlink;
 *          - every creation is exclusive, so case or Unicode aliases fail instead of redirecting a write;
 *          - attributes use no-follow forms (descriptor-based fchmod/futimes, lutimes, O_NOFOLLOW opens);
 *          - the staging tree is moved into the target only after the caller has authenticated the whole
 *            archive and checked its size and SHA-256 (placeTree), so a failed restore writes nothing; the
 *            move and the attribute pass never enter a symlink of the target.
 */
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Transform, Writable, type TransformCallback } from 'node:stream';
import * as tar from 'tar';
import { IntegrityError } from './envelope.js';
import { cannotRead, changedWhileRead } from './fs-errors.js';

// ---- scanning ----

export interface TreeScan {
  kind: 'directory' | 'file';
  /** Directory that tar runs in, and the one entry it archives there. */
  cwd: string;
  entry: string;
  files: number;
  directories: number;
  symlinks: number;
  /** Sum of regular file sizes. */
  fileBytes: number;
  /** An upper bound of the tar stream size (headers, long-name extensions, padding). */
  tarBoundBytes: number;
}

const BLOCK = 512;
const pad512 = (n: number) => Math.ceil(n / BLOCK) * BLOCK;

/** Walks the source once (lstat, no symlink following) for counts and a size bound. */
export async function scanTree(source: string, signal?: AbortSignal): Promise<TreeScan> {
  let absolute = path.resolve(source);
  let stat = await fsp.lstat(absolute).catch((error: unknown) => {
    throw cannotRead(absolute, error);
  });
  if (stat.isSymbolicLink()) {
    // A symlink named on the command line is followed when it leads to a directory (like `tar -H`, `cp -H`).
    const real = await fsp.realpath(absolute).catch(() => undefined);
    const target = real ? await fsp.stat(real) : undefined;
    if (real && target?.isDirectory()) {
      absolute = real;
      stat = target;
    }
  }
  const scan: TreeScan = {
    kind: stat.isDirectory() ? 'directory' : 'file',
    cwd: stat.isDirectory() ? absolute : path.dirname(absolute),
    entry: stat.isDirectory() ? '.' : path.basename(absolute),
    files: 0,
    directories: 0,
    symlinks: 0,
    fileBytes: 0,
    tarBoundBytes: 2 * BLOCK + 20 * BLOCK, // end-of-archive blocks + record padding
  };
  if (!stat.isDirectory() && !stat.isFile() && !stat.isSymbolicLink()) {
    throw new Error(`${source} is not a directory, a file or a symlink`);
  }
  const count = (entryPath: string, entryStat: fs.Stats) => {
    // One header block. A pax header (3 blocks covers names up to ~1000 bytes) is possible only for long or
    // non-ASCII names, links (their target may be long) and ids too large for the ustar fields. The bound used
    // to count one for every entry: 12% over the real tar of 3,000 small files, which made a 45 MiB tree
    // (27 MiB compressed) look as if it might exceed 50 MiB and cost a second tar+gzip pass (bench P6).
    const plainHeader =
      entryStat.isDirectory() || (entryStat.isFile() && entryStat.nlink === 1)
        ? /^[\x20-\x7e]{0,99}$/.test(entryPath) && entryStat.uid < 0o7777777 && entryStat.gid < 0o7777777
        : false;
    scan.tarBoundBytes += plainHeader ? BLOCK : 4 * BLOCK + pad512(Buffer.byteLength(entryPath));
    if (entryStat.isDirectory()) scan.directories += 1;
    else if (entryStat.isSymbolicLink()) scan.symlinks += 1;
    else if (entryStat.isFile()) {
      scan.files += 1;
      scan.fileBytes += entryStat.size;
      scan.tarBoundBytes += pad512(entryStat.size);
    }
  };
  if (!stat.isDirectory()) {
    count(scan.entry, stat);
    return scan;
  }
  const walk = async (dir: string, relative: string): Promise<void> => {
    signal?.throwIfAborted();
    const entries = await fsp.readdir(dir).catch((error: unknown) => {
      throw cannotRead(dir, error);
    });
    for (const name of entries) {
      const full = path.join(dir, name);
      const rel = `${relative}/${name}`;
      const entryStat = await fsp.lstat(full).catch((error: unknown) => {
        throw cannotRead(full, error);
      });
      count(rel, entryStat);
      if (entryStat.isDirectory()) await walk(full, rel);
    }
  };
  await walk(absolute, '.');
  return scan;
}

/** Counts of what tar actually wrote (for the sealed metadata). */
export interface PackCounts {
  files: number;
  directories: number;
  symlinks: number;
}

/** Sizes, times and identity of a file: any difference between two looks means it changed in between. */
const sameFile = (a: fs.Stats, b: fs.Stats) =>
  a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs && a.ino === b.ino && a.dev === b.dev;

/**
 * The tar stream of a scanned source. Unreadable entries fail the backup (strict) rather than vanish from it,
 * with the file named and the reason in words. A file that changes while it is read fails it too: tar writes
 * the size it saw in the header, so a file that shrank ends early (tar's "unexpected EOF") and one that grew
 * would be stored cut at its old size. Each file is looked at again once its content has been read, and the
 * stream only ends after every such look found the file as it was when its header was written.
 */
export async function* packTree(scan: TreeScan, counts?: PackCounts): AsyncGenerator<Buffer> {
  let changed: Error | undefined;
  const looks = new Set<Promise<void>>();
  const pack = tar.c(
    {
      cwd: scan.cwd,
      portable: false,
      follow: false,
      strict: true,
      gzip: false,
      // Reads of at most 1 MiB per file, so memory stays small and the upload's backpressure reaches the reads.
      maxReadSize: 1024 * 1024,
      onWriteEntry: (entry) => {
        if (entry.type === 'File' && entry.stat) {
          const before = entry.stat;
          entry.once('end', () => {
            const file = entry.absolute;
            const look: Promise<void> = fsp
              .lstat(file)
              .then(
                (after) => {
                  if (!sameFile(before, after)) changed ??= changedWhileRead(file);
                },
                (error: NodeJS.ErrnoException) => {
                  changed ??= error.code === 'ENOENT' ? changedWhileRead(file) : cannotRead(file, error);
                },
              )
              .finally(() => looks.delete(look));
            looks.add(look);
          });
        }
        if (!counts) return;
        if (entry.type === 'Directory') {
          if (entry.path !== './') counts.directories += 1;
        } else if (entry.type === 'SymbolicLink') counts.symlinks += 1;
        else if (entry.type === 'File' || entry.type === 'Link') counts.files += 1;
      },
    },
    [scan.entry],
  ) as unknown as AsyncIterable<Buffer> & { destroy(): void; on(event: 'error', listener: () => void): void };
  let ended = false;
  try {
    for await (const chunk of pack) {
      if (changed) throw changed;
      yield chunk;
    }
    ended = true;
  } catch (error) {
    if (error === changed) throw error;
    const failed = error as NodeJS.ErrnoException;
    if (failed.code === 'EOF' && failed.path) throw changedWhileRead(failed.path);
    if (failed.syscall && failed.path) throw cannotRead(failed.path, failed);
    throw error;
  } finally {
    if (!ended) {
      pack.on('error', () => undefined); // entries still being read may write into it once more
      pack.destroy();
    }
  }
  await Promise.all(looks);
  if (changed) throw changed;
}

// ---- stream helpers ----

/** Passes bytes through, counting and hashing them (SHA-256), with an optional progress callback. */
export class Meter extends Transform {
  bytes = 0;
  private readonly hash: Hash | undefined;
  constructor(options: { hash?: boolean; onBytes?: (total: number) => void; limit?: number; onLimit?: (seen: number) => Error } = {}) {
    super();
    this.hash = options.hash ? createHash('sha256') : undefined;
    this.onBytes = options.onBytes;
    this.limit = options.limit;
    this.onLimit = options.onLimit;
  }
  private readonly onBytes: ((total: number) => void) | undefined;
  private readonly limit: number | undefined;
  private readonly onLimit: ((seen: number) => Error) | undefined;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.limit !== undefined && this.bytes > this.limit) {
      callback(this.onLimit ? this.onLimit(this.bytes) : new Error('size limit exceeded'));
      return;
    }
    this.hash?.update(chunk);
    this.onBytes?.(this.bytes);
    callback(null, chunk);
  }

  digest(): string {
    if (!this.hash) throw new Error('this meter does not hash');
    return this.hash.digest('hex');
  }
}

/** A sink that only counts (dry runs), failing as soon as `limit` is crossed. */
export function countingSink(limit: number, onLimit: (seen: number) => Error): Writable & { bytes: number } {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      sink.bytes += chunk.length;
      callback(sink.bytes > limit ? onLimit(sink.bytes) : null);
    },
  }) as Writable & { bytes: number };
  sink.bytes = 0;
  return sink;
}

// ---- extraction ----

/** A refused archive entry: the archive decrypted fine but is not safe to write. */
export class UnsafeArchiveError extends IntegrityError {}

const RESTORED_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

const SEPARATORS = process.platform === 'win32' ? /[/\\]+/ : /\/+/;

const { O_WRONLY, O_RDONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = fs.constants;

/** Restoring as root keeps the archived owners (like tar); anyone else owns what they restore. */
const KEEP_OWNERS = process.getuid?.() === 0;

/** `p` as archive-relative segments, or a reason it is unsafe. */
function segments(p: string, field: string): string[] {
  if (p.includes('\0')) throw new UnsafeArchiveError(`refusing archive entry with a NUL byte in its ${field}`);
  if (p.startsWith('/') || (process.platform === 'win32' && (p.startsWith('\\') || /^[A-Za-z]:/.test(p)))) {
    throw new UnsafeArchiveError(`refusing archive entry with an absolute ${field}: ${JSON.stringify(p)}`);
  }
  const parts = p.split(SEPARATORS).filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) {
    throw new UnsafeArchiveError(`refusing archive entry whose ${field} leaves the target directory: ${JSON.stringify(p)}`);
  }
  return parts;
}

export interface DirectoryAttributes {
  path: string; // archive-relative, '/'-joined
  mode: number;
  mtime: Date;
  uid?: number;
  gid?: number;
}

/** What the extractor itself made in staging, by archive-relative path: the only truth it resolves paths against. */
type Made = { kind: 'directory' } | { kind: 'file' } | { kind: 'symlink'; target: string };

/**
 * A Writable that extracts a tar stream into `stagingDir` (new, private, made by this restore) and finishes only
 * when everything is written. Directories are created owner-writable (so the tree can be filled and moved);
 * their archived modes and mtimes are collected for placeTree().
 *
 * No path is ever resolved through the file system's view of staging. Every entry is resolved lexically against
 * a record of what this extractor created there, and refused unless:
 *  - its path and a hard link's target are relative, without `..` or NUL;
 *  - every parent is a directory this extractor created (never a symlink, a file or a hard link);
 *  - it does not replace an earlier entry (only a directory may be repeated, which updates its attributes);
 *  - a hard link names an earlier file of the archive; a hard link to a symlink becomes that symlink (a copy
 *    of it, so the link can never serve as a path to write through), a hard link to a directory is refused.
 * Every creation is exclusive (mkdir, open O_CREAT|O_EXCL|O_NOFOLLOW, symlink, link), so a name that the file
 * system takes for an earlier one (case or Unicode aliases on case- or normalization-insensitive file systems)
 * fails instead of being written through. File modes, owners and mtimes are set on the open descriptor.
 * Symlinks are restored verbatim (absolute or leaving the tree) and never followed.
 */
export function extractInto(stagingDir: string): Writable & { directories: DirectoryAttributes[]; entries: number } {
  const made = new Map<string, Made>([['', { kind: 'directory' }]]);
  const directories = new Map<string, DirectoryAttributes>();
  let failure: Error | undefined;
  let openFd: number | undefined;
  /** The final callback, waiting for the parser's end (or the first failure). */
  let whenEnded: (() => void) | undefined;

  const closeOpen = () => {
    if (openFd === undefined) return;
    const fd = openFd;
    openFd = undefined;
    try {
      fs.closeSync(fd);
    } catch {
      // already failing
    }
  };
  const finish = () => {
    const next = whenEnded;
    whenEnded = undefined;
    next?.();
  };
  /** Records the first failure; a file-system error that is not a refusal is reported as such. */
  const fail = (error: unknown) => {
    failure ??= error instanceof IntegrityError ? error : new Error(`cannot write the restored files: ${(error as Error).message}`);
    closeOpen();
    finish();
  };
  const unsafe = (reason: string, p: unknown) => new UnsafeArchiveError(`refusing archive entry ${reason}: ${JSON.stringify(p)}`);
  const onDisk = (parts: string[]) => path.join(stagingDir, ...parts);

  /** Runs one exclusive creation; a name the file system already holds is an alias of an earlier entry. */
  const create = <T>(shown: string, make: () => T): T => {
    try {
      return make();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' || code === 'ELOOP' || code === 'ENOTDIR') {
        throw unsafe('whose name the file system already holds for an earlier entry (a case or Unicode alias?)', shown);
      }
      throw error;
    }
  };

  /** Resolves the parents of `parts` against `made`, creating missing ones (when allowed). */
  const parents = (parts: string[], shown: string, createMissing: boolean) => {
    for (let i = 1; i < parts.length; i++) {
      const key = parts.slice(0, i).join('/');
      const known = made.get(key);
      if (known?.kind === 'directory') continue;
      if (known?.kind === 'symlink') throw unsafe('that would be written through a symlink', shown);
      if (known) throw unsafe('below a file', shown);
      if (!createMissing) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
      create(shown, () => fs.mkdirSync(onDisk(parts.slice(0, i)), 0o755));
      made.set(key, { kind: 'directory' });
    }
  };

  const symlink = (parts: string[], target: string, entry: tar.ReadEntry) => {
    if (target === '' || target.includes('\0')) throw unsafe('with an empty or NUL-bearing symlink target', entry.path);
    create(entry.path, () => fs.symlinkSync(target, onDisk(parts)));
    made.set(parts.join('/'), { kind: 'symlink', target });
    if (KEEP_OWNERS && entry.uid !== undefined && entry.gid !== undefined) fs.lchownSync(onDisk(parts), entry.uid, entry.gid);
    if (entry.mtime) fs.lutimesSync(onDisk(parts), entry.mtime, entry.mtime);
  };

  const file = (parts: string[], entry: tar.ReadEntry) => {
    const fd = create(entry.path, () => fs.openSync(onDisk(parts), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600));
    openFd = fd;
    made.set(parts.join('/'), { kind: 'file' });
    entry.on('data', (chunk: Buffer) => {
      if (failure) return;
      try {
        for (let offset = 0; offset < chunk.length; ) offset += fs.writeSync(fd, chunk, offset);
      } catch (error) {
        fail(error);
      }
    });
    entry.on('end', () => {
      if (failure) return;
      try {
        if (KEEP_OWNERS && entry.uid !== undefined && entry.gid !== undefined) fs.fchownSync(fd, entry.uid, entry.gid);
        fs.fchmodSync(fd, (entry.mode ?? 0o644) & 0o7777);
        if (entry.mtime) fs.futimesSync(fd, entry.mtime, entry.mtime);
        openFd = undefined;
        fs.closeSync(fd);
      } catch (error) {
        fail(error);
      }
    });
  };

  const restore = (entry: tar.ReadEntry) => {
    const parts = segments(entry.path, 'path');
    if (!RESTORED_TYPES.has(entry.type)) return entry.resume(); // devices, FIFOs: not restored
    if (parts.length === 0) {
      if (entry.type === 'Directory') return entry.resume(); // the archive root ('./') itself
      throw unsafe('without a name', entry.path);
    }
    parents(parts, entry.path, true);
    const key = parts.join('/');
    const known = made.get(key);
    if (known && !(known.kind === 'directory' && entry.type === 'Directory')) throw unsafe('that replaces an earlier entry', entry.path);
    sink.entries += 1;
    switch (entry.type) {
      case 'Directory':
        if (!known) {
          create(entry.path, () => fs.mkdirSync(onDisk(parts), 0o700));
          made.set(key, { kind: 'directory' });
        }
        directories.set(key, { path: key, mode: (entry.mode ?? 0o755) & 0o7777, mtime: entry.mtime ?? new Date(), uid: entry.uid, gid: entry.gid });
        return entry.resume();
      case 'SymbolicLink':
        symlink(parts, String(entry.linkpath ?? ''), entry);
        return entry.resume();
      case 'Link': {
        const shown = String(entry.linkpath ?? '');
        const target = segments(shown, 'hard link target');
        parents(target, shown, false);
        const linked = made.get(target.join('/'));
        if (!linked) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
        if (linked.kind === 'directory') throw unsafe('that is a hard link to a directory', entry.path);
        if (linked.kind === 'symlink') symlink(parts, linked.target, entry);
        else {
          create(entry.path, () => fs.linkSync(onDisk(target), onDisk(parts)));
          made.set(key, { kind: 'file' });
        }
        return entry.resume();
      }
      default:
        return file(parts, entry);
    }
  };

  const parser = new tar.Parser({ strict: true });
  parser.on('entry', (entry: tar.ReadEntry) => {
    if (failure) return entry.resume();
    try {
      restore(entry);
    } catch (error) {
      fail(error);
      entry.resume();
    }
  });
  parser.on('error', (error: Error) => fail(new IntegrityError(`the archive is not a valid tar stream: ${error.message}`)));
  parser.on('end', finish);

  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      if (!failure) parser.write(chunk);
      callback(failure ?? null);
    },
    final(callback) {
      if (failure) return callback(failure);
      whenEnded = () => {
        closeOpen();
        callback(failure ?? null);
      };
      parser.end();
    },
    destroy(error, callback) {
      closeOpen();
      callback(error);
    },
  }) as Writable & { directories: DirectoryAttributes[]; entries: number };
  Object.defineProperty(sink, 'directories', { get: () => [...directories.values()] });
  sink.entries = 0;
  return sink;
}

/**
 * Moves the verified staging tree into `target` (the staging directory itself is removed), then sets directory
 * modes, owners (as root) and mtimes deepest first, never through a symlink: every parent is checked with lstat
 * and the directory is opened O_DIRECTORY|O_NOFOLLOW, its attributes set on that descriptor.
 */
export async function placeTree(staging: string, target: string, overwrite: boolean, directories: DirectoryAttributes[]): Promise<void> {
  await moveTree(staging, target, overwrite);
  await fsp.rmdir(staging);
  const ordered = [...directories].sort((a, b) => b.path.split('/').length - a.path.split('/').length);
  for (const dir of ordered) {
    const parts = dir.path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const parent = path.join(target, ...parts.slice(0, i));
      if (!(await fsp.lstat(parent)).isDirectory()) throw new Error(`${parent} changed during the restore: it is no longer a directory`);
    }
    const handle = await fsp.open(path.join(target, ...parts), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    try {
      if (KEEP_OWNERS && dir.uid !== undefined && dir.gid !== undefined) await handle.chown(dir.uid, dir.gid);
      await handle.chmod(dir.mode);
      await handle.utimes(dir.mtime, dir.mtime);
    } finally {
      await handle.close();
    }
  }
}

/**
 * Moves every entry of `from` into `to`, never following a symlink of `to` (existing entries are inspected with
 * lstat; a symlink in the way is removed, not entered). Without `overwrite` the target entries must not exist;
 * with it, a directory is merged into an existing directory and anything else replaces what is there.
 */
async function moveTree(from: string, to: string, overwrite: boolean): Promise<void> {
  for (const name of await fsp.readdir(from)) {
    const source = path.join(from, name);
    const target = path.join(to, name);
    const existing = await fsp.lstat(target).catch(() => undefined);
    if (existing) {
      if (!overwrite) throw new Error(`${target} already exists`);
      const incoming = await fsp.lstat(source);
      if (existing.isDirectory() && incoming.isDirectory()) {
        await moveTree(source, target, overwrite);
        await fsp.rmdir(source);
        continue;
      }
      await fsp.rm(target, { recursive: true, force: true });
    }
    await fsp.rename(source, target);
  }
}
