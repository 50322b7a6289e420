/**
 * The restore side of the plaintext archive: safe extraction of a tar stream into a private staging directory,
 * listing, and the move of the verified staging tree into the target (archive.ts makes the tar stream).
 *
 * Restore: gunzip/unzstd → tar, into a private staging directory (new, 0700, made by this restore inside the
 *          target). The rules, which hold for any sequence of entries (extractInto() has the details):
 *          - no byte, mode, owner or time is applied outside staging during extraction: paths are resolved
 *            lexically against what the extractor itself created, never through a link on disk; an entry
 *            below anything but a directory it created, replacing an earlier entry, or named with `..` or an
 *            absolute path is refused; a hard link to a symlink becomes a copy of that symlink;
 *          - every creation is exclusive, so case or Unicode aliases fail instead of redirecting a write;
 *          - attributes use no-follow forms (descriptor-based fchmod/futimes, lutimes, O_NOFOLLOW opens);
 *          - the staging tree is moved into the target only after the caller has authenticated the whole
 *            archive and checked its size and SHA-256 (placeTree), so a failed restore writes nothing; the
 *            move and the attribute pass never enter a symlink of the target.
 *
 * Speed: creating a file costs the kernel far more than anything the extractor does (0.3–0.9 ms per create on
 * ext4 in a VM, where the whole P6 restore's own work is ~0.1 ms per file), and creates in one directory are
 * serialized by its lock while creates in different directories run side by side. So the checks run on the
 * main thread in archive order, and the file-system work runs as asynchronous jobs (libuv's thread pool), one
 * lane per directory: jobs in a directory one after another, different directories at the same time.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import * as tar from 'tar';
import { IntegrityError } from './envelope.js';
import { isPlainName, type SkippedEntry } from './envelope-format.js';

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
type Made = ({ kind: 'directory' } | { kind: 'file' } | { kind: 'symlink'; target: string }) & {
  /** An entry of the archive that a partial restore did not write (its kind still rules what may follow). */
  skipped?: boolean;
};

export interface ExtractResult {
  directories: DirectoryAttributes[];
  /** Entries written. */
  entries: number;
  /** Selected entries that could not be restored (a hard link to a file outside the selection). */
  skipped: SkippedEntry[];
}

/** How far the extractor may run ahead of the file system, and how much it asks of it at once. */
export interface ExtractLimits {
  /** File content held in memory for files not written yet (bytes; default 16 MiB). Past it, writes wait. */
  aheadBytes?: number;
  /** Entries parsed whose file-system work has not finished (default 1,024). Past it, writes wait. */
  aheadEntries?: number;
  /** File-system operations in flight at once (default 4, libuv's thread pool). */
  concurrency?: number;
  /** Files open at once (default 64). */
  openFiles?: number;
}

export interface ExtractOptions {
  /** A partial restore: only the entries this accepts (and the directories above them) are written. */
  select?: (relative: string, isDirectory: boolean) => boolean;
  limits?: ExtractLimits;
}

const DEFAULT_LIMITS: Required<ExtractLimits> = { aheadBytes: 16 * 1024 * 1024, aheadEntries: 1024, concurrency: 4, openFiles: 64 };
/** At most this many buffers per writev (IOV_MAX is 1024 on Linux). */
const WRITEV_BUFFERS = 256;

/** A node-style fs call as a promise (lighter than fs/promises' FileHandle for thousands of small files). */
const call = <T>(start: (done: (error: NodeJS.ErrnoException | null, value?: T) => void) => void) =>
  new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value as T))));

/** A counting semaphore, first come first served. */
class Gate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async acquire(): Promise<void> {
    if (this.active < this.limit) {
      this.active += 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next(); // the slot passes on
    else this.active -= 1;
  }
  async run<T>(op: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await op();
    } finally {
      this.release();
    }
  }
}

/** A file's content as the parser hands it on, waiting for its job to write it. */
class Body {
  chunks: Buffer[] = [];
  bytes = 0;
  ended = false;
  private wake: (() => void) | undefined;
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    this.poke();
  }
  end(): void {
    this.ended = true;
    this.poke();
  }
  /** Resolves on the next push, end or poke. */
  more(): Promise<void> {
    return new Promise((resolve) => (this.wake = resolve));
  }
  poke(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

/** A promise with its resolver outside (whether a file was created, for the hard links to it). */
const deferred = <T>() => {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
};

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
 *
 * The checks above and the record run synchronously, in archive order, as the parser hands on each entry; what
 * they allow becomes a job of the lane of the entry's directory. A lane starts only once its directory's mkdir
 * has succeeded, runs its jobs one after another, and different lanes run at the same time (at most
 * `limits.concurrency` operations in flight). So an entry is only ever created inside a directory this
 * extractor made, and two names that alias each other meet in the same lane (they share a directory) or below
 * directories whose own creations collided: one of the exclusive creations fails, whatever the timing. A hard
 * link waits until its target is created (it may still be being written). Small files' content waits in
 * memory (limits.aheadBytes, limits.aheadEntries; past either, the stream's write callback waits), a large
 * file is written as it arrives. The first failure in archive order wins: jobs of earlier entries still run,
 * later ones do not, and the stream ends (finishes, fails or is destroyed) only when no job is in flight,
 * so a caller that removes the staging directory afterwards never races a pending creation.
 */
export function extractInto(stagingDir: string, options: ExtractOptions = {}): Writable & ExtractResult {
  const made = new Map<string, Made>([['', { kind: 'directory' }]]);
  const directories = new Map<string, DirectoryAttributes>();
  /** Directories of the archive left out by `select`, kept in case a selected entry lies below one. */
  const unselected = new Map<string, DirectoryAttributes>();
  const { select } = options;
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  // The entry being parsed may wait for its content: the look-ahead must leave room for it.
  limits.aheadEntries = Math.max(1, limits.aheadEntries);
  limits.concurrency = Math.max(1, limits.concurrency);
  limits.openFiles = Math.max(1, limits.openFiles);
  const io = new Gate(limits.concurrency);
  const openFiles = new Gate(limits.openFiles);

  /** The tail of each directory's lane, by archive-relative key; a lane starts with its directory's mkdir. */
  const lanes = new Map<string, Promise<void>>([['', Promise.resolve()]]);
  /** Directories whose mkdir (by this extractor) succeeded: the only places a job creates anything in. */
  const createdDirs = new Set<string>(['']);
  /** Files of the archive: whether their creation succeeded (hard links wait for it). */
  const fileCreated = new Map<string, Promise<boolean>>();
  /** Bodies of files still waiting to be written. */
  const bodies = new Set<Body>();

  let sequence = 0; // jobs in archive order
  let pending = 0; // jobs not settled
  let aheadBytes = 0; // content parsed, not yet written
  let failure: Error | undefined;
  let failedAt = Infinity; // the sequence number of the job (or entry) that failed
  let stopped = false; // destroyed: no job starts any more
  let parserEnded = false;
  let heldWrite: ((error?: Error | null) => void) | undefined;
  let settledWaiters: (() => void)[] = [];
  /** The final callback, waiting for the parser's end (or the first failure). */
  let whenEnded: (() => void) | undefined;

  const whenSettled = (then: () => void) => {
    if (pending === 0) then();
    else settledWaiters.push(then);
  };
  const over = () => aheadBytes > limits.aheadBytes || pending > limits.aheadEntries;
  /** Lets a waiting write go on once the look-ahead is back under its bounds (or a failure ends the stream). */
  const relieve = () => {
    if (!heldWrite || (!failure && over())) return;
    const callback = heldWrite;
    heldWrite = undefined;
    if (failure) whenSettled(() => callback(failure));
    else callback();
  };
  const wakeAll = () => {
    for (const body of bodies) body.poke();
  };
  const finish = () => {
    const next = whenEnded;
    whenEnded = undefined;
    next?.();
  };
  /** Records a failure; the one of the earliest entry wins. A file-system error that is not a refusal is reported as such. */
  const fail = (error: unknown, at: number) => {
    if (at < failedAt) {
      failedAt = at;
      failure = error instanceof IntegrityError ? error : new Error(`cannot write the restored files: ${(error as Error).message}`);
    }
    wakeAll(); // no more content comes: a job waiting for some stops
    relieve();
    finish();
  };
  /** Jobs after a failure, and every job once destroyed, do not start. */
  const skipping = (at: number) => stopped || at > failedAt;
  const unsafe = (reason: string, p: unknown) => new UnsafeArchiveError(`refusing archive entry ${reason}: ${JSON.stringify(p)}`);
  const onDisk = (parts: string[]) => path.join(stagingDir, ...parts);
  const parentKey = (parts: string[]) => parts.slice(0, -1).join('/');

  /** One exclusive creation; a name the file system already holds is an alias of an earlier entry. */
  const create = async <T>(shown: string, make: () => Promise<T>): Promise<T> => {
    try {
      return await io.run(make);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' || code === 'ELOOP' || code === 'ENOTDIR') {
        throw unsafe('whose name the file system already holds for an earlier entry (a case or Unicode alias?)', shown);
      }
      throw error;
    }
  };

  /**
   * Queues `job` in the lane of directory `dir` (archive-relative key); returns the job's settling. It runs
   * after the lane's earlier jobs, only if `dir` was created by this extractor and nothing earlier failed.
   */
  const enqueue = (dir: string, job: (at: number) => Promise<void>, onSkip?: () => void): Promise<void> => {
    const at = sequence++;
    pending += 1;
    const tail = lanes.get(dir) ?? Promise.resolve();
    const settled = tail
      .then(async () => {
        if (skipping(at) || !createdDirs.has(dir)) return onSkip?.();
        try {
          await job(at);
        } catch (error) {
          fail(error, at);
        }
      })
      .finally(() => {
        pending -= 1;
        relieve();
        if (pending === 0) {
          const waiters = settledWaiters;
          settledWaiters = [];
          for (const waiter of waiters) waiter();
        }
      });
    lanes.set(dir, settled);
    return settled;
  };

  const mkdir = (parts: string[], shown: string, mode: number) => {
    const key = parts.join('/');
    const done = enqueue(parentKey(parts), async () => {
      await create(shown, () => call<void>((cb) => fs.mkdir(onDisk(parts), mode, (error) => cb(error))));
      createdDirs.add(key);
    });
    lanes.set(key, done); // the directory's own lane starts once it exists
  };

  /** Resolves the parents of `parts` against `made`, creating missing ones (when allowed). */
  const parents = (parts: string[], shown: string, createMissing: boolean) => {
    for (let i = 1; i < parts.length; i++) {
      const key = parts.slice(0, i).join('/');
      const known = made.get(key);
      if (known?.kind === 'directory' && !known.skipped) continue;
      if (known?.kind === 'symlink') throw unsafe('that would be written through a symlink', shown);
      if (known?.kind === 'file') throw unsafe('below a file', shown);
      if (!known && !createMissing) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
      // A missing parent, or a directory of the archive that the selection left out: made now, with the
      // archived attributes when the archive had it.
      mkdir(parts.slice(0, i), shown, 0o755);
      made.set(key, { kind: 'directory' });
      const attributes = unselected.get(key);
      if (attributes) directories.set(key, attributes);
    }
  };

  const symlink = (parts: string[], target: string, entry: tar.ReadEntry) => {
    if (target === '' || target.includes('\0')) throw unsafe('with an empty or NUL-bearing symlink target', entry.path);
    made.set(parts.join('/'), { kind: 'symlink', target });
    const shown = entry.path;
    const { uid, gid, mtime } = entry;
    const where = onDisk(parts);
    enqueue(parentKey(parts), async () => {
      await create(shown, () => call<void>((cb) => fs.symlink(target, where, (error) => cb(error))));
      if (KEEP_OWNERS && uid !== undefined && gid !== undefined) await io.run(() => call<void>((cb) => fs.lchown(where, uid, gid, (e) => cb(e))));
      if (mtime) await io.run(() => call<void>((cb) => fs.lutimes(where, mtime, mtime, (e) => cb(e))));
    });
  };

  const link = (parts: string[], target: string[], shown: string) => {
    const key = parts.join('/');
    made.set(key, { kind: 'file' });
    const created = deferred<boolean>();
    fileCreated.set(key, created.promise);
    const targetCreated = fileCreated.get(target.join('/')) ?? Promise.resolve(false);
    enqueue(
      parentKey(parts),
      async (at) => {
        try {
          // The target is an earlier file: wait until it exists (its content may still be on its way).
          if (!(await targetCreated)) {
            if (!skipping(at)) throw new Error(`the hard link target of ${shown} was not created`);
            return;
          }
          if (skipping(at)) return;
          await create(shown, () => call<void>((cb) => fs.link(onDisk(target), onDisk(parts), (error) => cb(error))));
          created.resolve(true);
        } finally {
          created.resolve(false);
        }
      },
      () => created.resolve(false),
    );
  };

  /** Writes `chunks` at the descriptor's position, all of them (writev may write less than asked). */
  const writeAll = async (fd: number, chunks: Buffer[]) => {
    let rest = chunks;
    while (rest.length > 0) {
      const batch = rest.slice(0, WRITEV_BUFFERS);
      let written = await io.run(() => call<number>((cb) => fs.writev(fd, batch, (error, n) => cb(error, n))));
      aheadBytes -= written;
      const left: Buffer[] = [];
      for (const chunk of batch) {
        if (written >= chunk.length) written -= chunk.length;
        else {
          left.push(written > 0 ? chunk.subarray(written) : chunk);
          written = 0;
        }
      }
      rest = [...left, ...rest.slice(batch.length)];
      relieve();
    }
  };

  const file = (parts: string[], entry: tar.ReadEntry) => {
    const key = parts.join('/');
    made.set(key, { kind: 'file' });
    const body = new Body();
    bodies.add(body);
    entry.on('data', (chunk: Buffer) => {
      if (!bodies.has(body)) return;
      aheadBytes += chunk.length;
      body.push(chunk);
    });
    entry.on('end', () => body.end());
    const created = deferred<boolean>();
    fileCreated.set(key, created.promise);
    const shown = entry.path;
    const { uid, gid, mtime } = entry;
    const mode = (entry.mode ?? 0o644) & 0o7777;
    const where = onDisk(parts);
    const forget = () => {
      bodies.delete(body);
      aheadBytes -= body.bytes;
      body.chunks = [];
      body.bytes = 0;
      created.resolve(false);
    };
    enqueue(
      parentKey(parts),
      async (at) => {
        await openFiles.acquire();
        let fd: number | undefined;
        try {
          fd = await create(shown, () => call<number>((cb) => fs.open(where, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600, cb)));
          created.resolve(true);
          for (;;) {
            if (stopped) return;
            if (body.chunks.length > 0) {
              const chunks = body.chunks;
              body.chunks = [];
              const bytes = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
              body.bytes -= bytes;
              await writeAll(fd, chunks);
              continue;
            }
            if (body.ended) break;
            if (skipping(at) || failure) return; // no more content comes
            if (parserEnded) throw new IntegrityError(`the archive ends inside ${JSON.stringify(shown)}`);
            await body.more();
          }
          const opened = fd;
          if (KEEP_OWNERS && uid !== undefined && gid !== undefined) await io.run(() => call<void>((cb) => fs.fchown(opened, uid, gid, (e) => cb(e))));
          await io.run(() => call<void>((cb) => fs.fchmod(opened, mode, (e) => cb(e))));
          if (mtime) await io.run(() => call<void>((cb) => fs.futimes(opened, mtime, mtime, (e) => cb(e))));
        } finally {
          forget();
          if (fd !== undefined) {
            const opened = fd;
            await io.run(() => call<void>((cb) => fs.close(opened, (e) => cb(e))));
          }
          openFiles.release();
        }
      },
      forget,
    );
  };

  /**
   * An entry the selection leaves out: nothing is written, but it is checked and recorded like a written one,
   * so the refusals of a partial restore are those of a full one (nothing may replace it or lie below a
   * symlink or a file of the archive).
   */
  const skip = (parts: string[], key: string, entry: tar.ReadEntry) => {
    for (let i = 1; i < parts.length; i++) {
      const known = made.get(parts.slice(0, i).join('/'));
      if (known?.kind === 'symlink') throw unsafe('that would be written through a symlink', entry.path);
      if (known?.kind === 'file') throw unsafe('below a file', entry.path);
    }
    const known = made.get(key);
    if (known && !(known.kind === 'directory' && entry.type === 'Directory')) throw unsafe('that replaces an earlier entry', entry.path);
    if (entry.type === 'Directory') {
      if (!known) made.set(key, { kind: 'directory', skipped: true });
      const attributes = { path: key, mode: (entry.mode ?? 0o755) & 0o7777, mtime: entry.mtime ?? new Date(), uid: entry.uid, gid: entry.gid };
      if (made.get(key)?.skipped) unselected.set(key, attributes);
      else directories.set(key, attributes);
    } else if (entry.type === 'SymbolicLink') {
      const target = String(entry.linkpath ?? '');
      if (target === '' || target.includes('\0')) throw unsafe('with an empty or NUL-bearing symlink target', entry.path);
      made.set(key, { kind: 'symlink', target, skipped: true });
    } else if (entry.type === 'Link') {
      const shown = String(entry.linkpath ?? '');
      const linked = made.get(segments(shown, 'hard link target').join('/'));
      if (!linked) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
      if (linked.kind === 'directory') throw unsafe('that is a hard link to a directory', entry.path);
      made.set(key, linked.kind === 'symlink' ? { kind: 'symlink', target: linked.target, skipped: true } : { kind: 'file', skipped: true });
    } else made.set(key, { kind: 'file', skipped: true });
    entry.resume();
  };

  const restore = (entry: tar.ReadEntry) => {
    const parts = segments(entry.path, 'path');
    if (!RESTORED_TYPES.has(entry.type)) return entry.resume(); // devices, FIFOs: not restored
    if (parts.length === 0) {
      if (entry.type === 'Directory') return entry.resume(); // the archive root ('./') itself
      throw unsafe('without a name', entry.path);
    }
    const key = parts.join('/');
    if (select && !select(key, entry.type === 'Directory')) return skip(parts, key, entry);
    parents(parts, entry.path, true);
    const known = made.get(key);
    if (known && !(known.kind === 'directory' && entry.type === 'Directory')) throw unsafe('that replaces an earlier entry', entry.path);
    sink.entries += 1;
    switch (entry.type) {
      case 'Directory':
        if (!known || known.skipped) {
          mkdir(parts, entry.path, 0o700);
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
        const early = made.get(target.join('/'));
        if (early?.kind === 'file' && early.skipped) {
          // Its content was not written: there is nothing to link to (its parents were checked when it passed).
          sink.entries -= 1;
          sink.skipped.push({ path: key, reason: `a hard link to ${target.join('/')}, which the selection leaves out (include it too)` });
          return entry.resume();
        }
        parents(target, shown, false);
        const linked = made.get(target.join('/'));
        if (!linked) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
        if (linked.kind === 'directory') throw unsafe('that is a hard link to a directory', entry.path);
        if (linked.kind === 'symlink') symlink(parts, linked.target, entry);
        else link(parts, target, entry.path);
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
      fail(error, sequence);
      entry.resume();
    }
  });
  parser.on('error', (error: Error) => fail(new IntegrityError(`the archive is not a valid tar stream: ${error.message}`), sequence));
  parser.on('end', () => {
    parserEnded = true;
    wakeAll();
    finish();
  });

  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      if (!failure) parser.write(chunk);
      if (failure) return whenSettled(() => callback(failure));
      if (over()) heldWrite = callback;
      else callback();
    },
    final(callback) {
      if (failure) return whenSettled(() => callback(failure));
      whenEnded = () => whenSettled(() => callback(failure ?? null));
      parser.end();
    },
    destroy(error, callback) {
      stopped = true;
      wakeAll();
      whenSettled(() => callback(error));
    },
  }) as Writable & ExtractResult;
  Object.defineProperty(sink, 'directories', { get: () => [...directories.values()] });
  sink.entries = 0;
  sink.skipped = [];
  return sink;
}

/**
 * Resolves once `sink` has closed, destroying it first if it is still open. A pipeline that fails upstream
 * rejects before its destroyed sink has closed; extractInto() closes only when none of its file-system jobs is
 * in flight, so a caller awaits this before it removes the staging directory.
 */
export async function closed(sink: Writable): Promise<void> {
  if (sink.closed) return;
  const done = new Promise<void>((resolve) => sink.once('close', () => resolve()));
  sink.destroy();
  await done;
}

/** One entry of a backup as `coffer ls` shows it. */
export interface ListedEntry {
  /** Archive-relative, '/'-separated, without a leading './' or a trailing '/'. */
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'hardlink' | 'other';
  size: number;
  mode: number;
  /** RFC 3339, whole seconds (as tar keeps them); null when the entry has none. */
  mtime: string | null;
  /** A symlink's target or a hard link's (archive-relative) target. */
  linkTarget?: string;
}

const LISTED_TYPES: Record<string, ListedEntry['type']> = {
  File: 'file',
  OldFile: 'file',
  ContiguousFile: 'file',
  Directory: 'directory',
  SymbolicLink: 'symlink',
  Link: 'hardlink',
};

/** The archive-relative form of a tar path: './a/b/' → 'a/b'; '' for the archive root. */
export const listedPath = (p: string): string =>
  p
    .split(SEPARATORS)
    .filter((part) => part !== '' && part !== '.')
    .join('/');

/** A Writable that parses a tar stream and collects its entries (nothing is written anywhere). */
export function listInto(): Writable & { entries: ListedEntry[] } {
  let failure: Error | undefined;
  let whenEnded: (() => void) | undefined;
  const parser = new tar.Parser({ strict: true });
  parser.on('entry', (entry: tar.ReadEntry) => {
    const listed = listedPath(entry.path);
    if (listed !== '' || entry.type !== 'Directory') {
      const linkTarget = entry.linkpath ? String(entry.linkpath) : undefined;
      sink.entries.push({
        path: listed,
        type: LISTED_TYPES[entry.type] ?? 'other',
        size: entry.type === 'File' || entry.type === 'OldFile' || entry.type === 'ContiguousFile' ? (entry.size ?? 0) : 0,
        mode: (entry.mode ?? 0) & 0o7777,
        mtime: entry.mtime ? entry.mtime.toISOString().replace('.000Z', 'Z') : null,
        ...(linkTarget !== undefined ? { linkTarget } : {}),
      });
    }
    entry.resume();
  });
  parser.on('error', (error: Error) => {
    failure ??= new IntegrityError(`the archive is not a valid tar stream: ${error.message}`);
    whenEnded?.();
  });
  parser.on('end', () => whenEnded?.());
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      if (!failure) parser.write(chunk);
      callback(failure ?? null);
    },
    final(callback) {
      if (failure) return callback(failure);
      whenEnded = () => {
        whenEnded = undefined;
        callback(failure ?? null);
      };
      parser.end();
    },
  }) as Writable & { entries: ListedEntry[] };
  sink.entries = [];
  return sink;
}

/** A Writable that takes everything and keeps nothing (verify). */
export const discard = (): Writable =>
  new Writable({
    write(_chunk, _encoding, callback) {
      callback();
    },
  });

/**
 * A Writable that stores a raw archive (the bytes of one file, a backup of standard input) as `<staging>/<name>`:
 * created exclusively, mode 0600 (the stream had none), mtime the backup's time. `name` is one path segment
 * (isPlainName, checked when the metadata was opened).
 */
export function extractRaw(stagingDir: string, name: string, mtime: Date): Writable & ExtractResult {
  if (!isPlainName(name)) throw new UnsafeArchiveError(`refusing a raw backup named ${JSON.stringify(name)}`);
  let fd: number | undefined;
  const sink = new Writable({
    construct(callback) {
      try {
        fd = fs.openSync(path.join(stagingDir, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
        callback();
      } catch (error) {
        callback(error as Error);
      }
    },
    write(chunk: Buffer, _encoding, callback) {
      try {
        for (let offset = 0; offset < chunk.length; ) offset += fs.writeSync(fd!, chunk, offset);
        callback();
      } catch (error) {
        callback(new Error(`cannot write the restored file: ${(error as Error).message}`));
      }
    },
    final(callback) {
      try {
        fs.futimesSync(fd!, mtime, mtime);
        fs.closeSync(fd!);
        fd = undefined;
        callback();
      } catch (error) {
        callback(error as Error);
      }
    },
    destroy(error, callback) {
      if (fd !== undefined) fs.closeSync(fd);
      fd = undefined;
      callback(error);
    },
  }) as Writable & ExtractResult;
  sink.entries = 1;
  sink.directories = [];
  sink.skipped = [];
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
