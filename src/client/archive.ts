/**
 * The plaintext side of a backup: a tar stream of a directory (or one file).
 *
 * Backup:  tar (modes, mtimes to the second, empty directories, symlinks, hard links) → gzip
 * Restore: extract.ts (safe extraction into a private staging directory, then the move into the target).
 */
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Transform, Writable, type TransformCallback } from 'node:stream';
import * as tar from 'tar';
import type { SkippedEntry } from './envelope-format.js';
import { cannotRead, changedWhileRead, fsReason, SourceReadError } from './fs-errors.js';
import { ExcludeRules, IGNORE_FILE } from './select.js';

// ---- scanning: what goes in ----

/** One tar run: the directory it runs in and the entries (relative to it) it archives, in order. */
export interface PackRoot {
  cwd: string;
  entries: string[];
}

export interface TreeScan {
  /** `file` for one file (or symlink) named alone, `directory` otherwise. */
  kind: 'directory' | 'file';
  /** Every source path, absolute. */
  sources: string[];
  /** One tar run per source; their streams are joined into one archive. */
  roots: PackRoot[];
  files: number;
  directories: number;
  symlinks: number;
  /** Sum of regular file sizes. */
  fileBytes: number;
  /** An upper bound of the tar stream size (headers, long-name extensions, padding). */
  tarBoundBytes: number;
  /** Entries that exclude rules left out. */
  excluded: number;
  /** Entries left out: unreadable ones (with skipUnreadable) and special files (FIFOs, sockets, devices). */
  skipped: SkippedEntry[];
}

export interface ScanOptions {
  /** gitignore-style patterns, relative to each backed-up directory (`--exclude`, `--exclude-file`). */
  exclude?: readonly string[];
  /** Honour `.cofferignore` files inside the tree (default true). */
  ignoreFiles?: boolean;
  /** Leave out what cannot be read (listed in `skipped`) instead of failing. */
  skipUnreadable?: boolean;
  signal?: AbortSignal;
}

const BLOCK = 512;
const pad512 = (n: number) => Math.ceil(n / BLOCK) * BLOCK;
/** node-tar ends every archive with exactly two zero blocks (no record padding). */
const TAR_END = 2 * BLOCK;
/** How many unreadable files an error message names before "and N more". */
const NAMED_IN_MESSAGE = 20;

/** The sources could not all be read: every unreadable path is named. */
export class UnreadableSourceError extends SourceReadError {
  constructor(readonly unreadable: SkippedEntry[]) {
    const shown = unreadable.slice(0, NAMED_IN_MESSAGE).map((u) => `\n  ${u.path}: ${u.reason}`);
    const more = unreadable.length > NAMED_IN_MESSAGE ? `\n  and ${unreadable.length - NAMED_IN_MESSAGE} more` : '';
    const what =
      unreadable.length === 1
        ? `cannot read ${unreadable[0]!.path}: ${unreadable[0]!.reason}; `
        : `cannot read ${unreadable.length} entries of the source:${shown.join('')}${more}\n`;
    super(
      `${what}nothing was stored. Fix the permissions, exclude them (--exclude), or pass --skip-unreadable to back up the rest.`,
      unreadable[0]!.path,
    );
  }
}

const special = (stat: fs.Stats) =>
  stat.isFIFO() ? 'a FIFO' : stat.isSocket() ? 'a socket' : stat.isCharacterDevice() || stat.isBlockDevice() ? 'a device' : 'of an unknown type';

/** Opens (never reads) a regular file to learn whether it can be read; O_NONBLOCK so nothing can make it wait. */
async function readable(file: string): Promise<unknown> {
  try {
    const handle = await fsp.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW);
    await handle.close();
    return undefined;
  } catch (error) {
    return error;
  }
}

/**
 * Walks the sources once (lstat, no symlink following) and decides what the archive holds: exclude rules are
 * applied before an entry is opened or a directory listed, so nothing excluded is ever read (a `.cofferignore`
 * is read only when the rules so far do not exclude it). Every regular file that is kept is opened once (not
 * read) to find unreadable ones before anything is uploaded; they fail the backup, all named, unless
 * skipUnreadable leaves them out. FIFOs, sockets and devices are never opened and never archived (listed in
 * `skipped`). One source keeps the layout of earlier versions (a directory's entries as `./…`, a file under
 * its base name); several are archived side by side under their base names, which must differ.
 */
export async function scanTree(source: string | readonly string[], options: ScanOptions = {}): Promise<TreeScan> {
  const { signal } = options;
  const sources = typeof source === 'string' ? [source] : [...source];
  if (sources.length === 0) throw new Error('nothing to back up: no path given');
  const several = sources.length > 1;
  const scan: TreeScan = {
    kind: 'directory',
    sources: [],
    roots: [],
    files: 0,
    directories: 0,
    symlinks: 0,
    fileBytes: 0,
    tarBoundBytes: TAR_END + 20 * BLOCK, // end-of-archive blocks + record padding
    excluded: 0,
    skipped: [],
  };
  const unreadable: SkippedEntry[] = [];
  const cannot = (file: string, error: unknown) => unreadable.push({ path: file, reason: fsReason(error) });
  const names = new Map<string, string>();

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

  for (const given of sources) {
    let absolute = path.resolve(given);
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
    if (!stat.isDirectory() && !stat.isFile() && !stat.isSymbolicLink()) {
      throw new Error(`${given} is not a directory, a file or a symlink`);
    }
    const cwd = stat.isDirectory() && !several ? absolute : path.dirname(absolute);
    const top = stat.isDirectory() && !several ? '.' : path.basename(absolute);
    if (several) {
      if (top === '' || top === '.' || top === '..') throw new Error(`${given} cannot be backed up together with other paths: it has no name`);
      const earlier = names.get(top);
      if (earlier !== undefined) {
        throw new Error(`${earlier} and ${given} would both be stored as "${top}": back them up separately (or back up their parent)`);
      }
      names.set(top, given);
    }
    scan.sources.push(absolute);
    if (!stat.isDirectory()) {
      const problem = stat.isFile() ? await readable(absolute) : undefined;
      if (problem) throw cannotRead(absolute, problem);
      scan.kind = several ? 'directory' : 'file';
      scan.roots.push({ cwd, entries: [top] });
      count(top, stat);
      continue;
    }
    const rootNames = await fsp.readdir(absolute).catch((error: unknown) => {
      throw cannotRead(absolute, error);
    });
    const entries: string[] = [top];
    count(top, stat);
    const useIgnoreFiles = options.ignoreFiles ?? true;

    const walk = async (dir: string, relative: string, children: string[], outer: ExcludeRules): Promise<void> => {
      signal?.throwIfAborted();
      let rules = outer;
      if (useIgnoreFiles && children.includes(IGNORE_FILE)) {
        const rulesPath = relative === '' ? IGNORE_FILE : `${relative}/${IGNORE_FILE}`;
        const file = path.join(dir, IGNORE_FILE);
        const ruleStat = await fsp.lstat(file).catch(() => undefined);
        if (ruleStat?.isFile() && !rules.excludes(rulesPath, false)) {
          const text = await fsp.readFile(file, 'utf8').catch((error: unknown) => {
            cannot(file, error);
            return undefined;
          });
          if (text !== undefined) rules = rules.with(relative, text);
        }
      }
      for (const name of [...children].sort()) {
        const full = path.join(dir, name);
        const rel = relative === '' ? name : `${relative}/${name}`;
        const entryStat = await fsp.lstat(full).catch((error: unknown) => {
          cannot(full, error);
          return undefined;
        });
        if (!entryStat) continue;
        const isDirectory = entryStat.isDirectory();
        if (rules.excludes(rel, isDirectory)) {
          scan.excluded += 1;
          continue;
        }
        const entry = `${top}/${rel}`;
        if (isDirectory) {
          const below = await fsp.readdir(full).catch((error: unknown) => {
            cannot(full, error);
            return undefined;
          });
          if (!below) continue;
          entries.push(entry);
          count(entry, entryStat);
          await walk(full, rel, below, rules);
        } else if (entryStat.isFile()) {
          const problem = await readable(full);
          if (problem) {
            cannot(full, problem);
            continue;
          }
          entries.push(entry);
          count(entry, entryStat);
        } else if (entryStat.isSymbolicLink()) {
          entries.push(entry);
          count(entry, entryStat);
        } else {
          scan.skipped.push({ path: full, reason: `${special(entryStat)}: not archived` });
        }
      }
    };
    await walk(absolute, '', rootNames, ExcludeRules.of(options.exclude ?? []));
    scan.roots.push({ cwd, entries });
  }
  if (unreadable.length > 0) {
    if (!options.skipUnreadable) throw new UnreadableSourceError(unreadable);
    scan.skipped.unshift(...unreadable.map((u) => ({ path: u.path, reason: `cannot be read: ${u.reason}` })));
  }
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
 * The tar stream of a scanned source: exactly the entries the scan kept (tar is given the list and never lists
 * a directory itself), one tar run per source, joined into one archive (the end blocks of all but the last run
 * are dropped). An entry that cannot be read now fails the backup (strict) rather than vanish from it, with
 * the file named and the reason in words. A file that changes while it is read fails it too: tar writes the
 * size it saw in the header, so a file that shrank ends early (tar's "unexpected EOF") and one that grew would
 * be stored cut at its old size. Each file is looked at again once its content has been read, and the stream
 * only ends after every such look found the file as it was when its header was written.
 */
export async function* packTree(scan: TreeScan, counts?: PackCounts): AsyncGenerator<Buffer> {
  for (let i = 0; i < scan.roots.length; i++) {
    const last = i === scan.roots.length - 1;
    if (last) {
      yield* packRoot(scan.roots[i]!, counts);
      continue;
    }
    // Hold back the final two blocks: they end this run's archive, and another run follows.
    let held: Buffer = Buffer.alloc(0);
    for await (const chunk of packRoot(scan.roots[i]!, counts)) {
      held = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
      if (held.length > TAR_END) {
        yield held.subarray(0, held.length - TAR_END);
        held = Buffer.from(held.subarray(held.length - TAR_END));
      }
    }
    if (held.length !== TAR_END || held.some((byte) => byte !== 0)) throw new Error('tar did not end its archive with two zero blocks');
  }
}

async function* packRoot(root: PackRoot, counts?: PackCounts): AsyncGenerator<Buffer> {
  let changed: Error | undefined;
  const looks = new Set<Promise<void>>();
  const pack = tar.c(
    {
      cwd: root.cwd,
      portable: false,
      follow: false,
      strict: true,
      gzip: false,
      // The scan chose every entry: tar archives the list and does not read directories on its own.
      noDirRecurse: true,
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
    root.entries,
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
