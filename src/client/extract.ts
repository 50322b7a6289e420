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
 * Speed: creating a file costs the kernel far more than anything the extractor does for it, and creates in one
 * directory are serialized by its lock while creates in different directories run side by side. So the checks run
 * on the main thread in archive order, and the file-system work runs as asynchronous jobs (libuv's thread pool),
 * one lane per directory: jobs in a directory one after another, different directories at the same time.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import * as tar from 'tar';
import { IntegrityError } from './envelope.js';
import { isPlainName, type SkippedEntry } from './envelope-format.js';
import { type ExtractLimits, type Place, prestartWorkers, STAGING, WorkerLanes } from './extract-lanes.js';
import {
  type DirectoryAttributes,
  type Effects,
  EntryPolicy,
  type PolicyEntry,
  SEPARATORS,
  UnsafeArchiveError,
  unsafe,
} from './extract-policy.js';

export { type DirectoryAttributes, UnsafeArchiveError } from './extract-policy.js';
export { dropSpareWorkers } from './extract-lanes.js';

const { O_WRONLY, O_RDONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = fs.constants;

/** Restoring as root keeps the archived owners (like tar); anyone else owns what they restore. */
const KEEP_OWNERS = process.getuid?.() === 0;

export interface ExtractResult {
  directories: DirectoryAttributes[];
  /** Entries written. */
  entries: number;
  /** Selected entries that could not be restored (a hard link to a file outside the selection). */
  skipped: SkippedEntry[];
}

export interface ExtractOptions {
  /** A partial restore: only the entries this accepts (and the directories above them) are written. */
  select?: (relative: string, isDirectory: boolean) => boolean;
  limits?: ExtractLimits;
}

const DEFAULT_LIMITS: Required<ExtractLimits> = {
  aheadBytes: 8 * 1024 * 1024,
  aheadEntries: 2048,
  workers: Math.min(4, os.availableParallelism()),
};

/** Starts the threads of an extractInto() with the default limits ahead of it (extract-lanes.ts, prestartWorkers). */
export function prestartExtraction(): void {
  prestartWorkers(DEFAULT_LIMITS.workers);
}

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
 * The checks and the record run on the calling thread, synchronously, in archive order (extract-policy.ts). What
 * they allow is done by worker threads (scheduled by extract-lanes.ts, done by extract-worker.ts): each directory
 * belongs to one worker, which creates it and everything in it, in archive order; different directories are
 * filled at the same time. A creation that depends on another worker's (its directory's, a hard link's target) waits
 * for it and is skipped if anything up to it
 * failed, so nothing is ever created but inside a directory this extractor made, and two names that alias each
 * other still meet in exclusive creations: one fails, whatever the timing. Content is sent on as it is parsed
 * (a large file is written as it arrives); limits.aheadBytes and limits.aheadEntries bound what is sent and not
 * yet written (past either, the stream's write callback waits). The failure of the earliest entry wins: earlier
 * entries are still written, later ones are not, and the stream ends (finishes, fails or is destroyed) only
 * when the workers answered for everything, so a caller that then removes staging never races a creation.
 */
export function extractInto(stagingDir: string, options: ExtractOptions = {}): Writable & ExtractResult {
  /** The final callback, waiting for the parser's end (or the first failure). */
  let whenEnded: (() => void) | undefined;
  const finish = () => {
    const next = whenEnded;
    whenEnded = undefined;
    next?.();
  };
  const lanes = new WorkerLanes({ ...DEFAULT_LIMITS, ...options.limits }, KEEP_OWNERS, finish);
  const { effects, file } = laneEffects(lanes, stagingDir);
  /** The checks and the record of what was made (extract-policy.ts); the creations it allows are queued in the lanes. */
  const policy = new EntryPolicy(effects, options.select);

  const parser = new tar.Parser({ strict: true });
  parser.on('entry', (entry: tar.ReadEntry) => {
    if (lanes.failure) return entry.resume();
    try {
      const content = policy.admit(entry);
      if (content) file(content, entry);
      else entry.resume();
    } catch (error) {
      lanes.fail(error, lanes.sequence);
      entry.resume();
    }
  });
  parser.on('error', (error: Error) =>
    lanes.fail(new IntegrityError(`the archive is not a valid tar stream: ${error.message}`), lanes.sequence),
  );
  parser.on('end', finish);

  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      if (!lanes.failure) parser.write(chunk);
      lanes.flush();
      lanes.whenRoom(callback);
    },
    final(callback) {
      if (lanes.failure) return void lanes.close(false).then(() => callback(lanes.failure));
      whenEnded = () => void lanes.close(false).then(() => callback(lanes.failure ?? null));
      parser.end();
    },
    destroy(error, callback) {
      void lanes.close(true).then(() => callback(error));
    },
  }) as Writable & ExtractResult;
  Object.defineProperty(sink, 'directories', { get: () => [...policy.directories.values()] });
  Object.defineProperty(sink, 'entries', { get: () => policy.entries });
  Object.defineProperty(sink, 'skipped', { get: () => policy.skipped });
  return sink;
}

/**
 * The policy's creations as jobs in the lanes, each after what it needs (its directory's creation, a hard link's
 * target), and a regular file's content as it is parsed. Keeps where each created entry's creation runs.
 */
function laneEffects(lanes: WorkerLanes, stagingDir: string) {
  const creation = new Map<string, Place>([['', STAGING]]);
  const onDisk = (parts: string[]) => path.join(stagingDir, ...parts);
  const parentKey = (parts: string[]) => parts.slice(0, -1).join('/');
  /** The creation of the directory an entry goes in (it exists when its creation is done). */
  const parentCreation = (parts: string[]) => creation.get(parentKey(parts)) ?? STAGING;
  const mtimeOf = (mtime: Date | undefined) => (mtime ? { mtime: mtime.getTime() } : {});

  const effects: Effects = {
    mkdir(parts, shown, mode) {
      const key = parts.join('/');
      // A directory is created by the worker that owns it (and fills it), once its parent exists.
      creation.set(key, lanes.queue(key, { op: 'mkdir', path: onDisk(parts), shown, mode }, [parentCreation(parts)]));
    },
    symlink(parts, target, entry: PolicyEntry) {
      const { uid, gid, mtime } = entry;
      lanes.queue(parentKey(parts), { op: 'symlink', path: onDisk(parts), shown: entry.path, target, uid, gid, ...mtimeOf(mtime) }, [
        parentCreation(parts),
      ]);
    },
    link(parts, target, shown) {
      // The target is an earlier file: its creation comes first (its content may still be on its way).
      const targetCreation = creation.get(target.join('/'));
      if (!targetCreation) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
      const placed = lanes.queue(parentKey(parts), { op: 'link', path: onDisk(parts), shown, target: onDisk(target) }, [
        parentCreation(parts),
        targetCreation,
      ]);
      creation.set(parts.join('/'), placed);
    },
  };

  const file = (parts: string[], entry: tar.ReadEntry) => {
    const placed = lanes.queue(parentKey(parts), { op: 'open', path: onDisk(parts), shown: entry.path }, [parentCreation(parts)]);
    creation.set(parts.join('/'), placed);
    const { uid, gid, mtime } = entry;
    const mode = (entry.mode ?? 0o644) & 0o7777;
    entry.on('data', (chunk: Buffer) => {
      if (!lanes.failure) lanes.write(placed, chunk);
    });
    entry.on('end', () => {
      if (!lanes.failure) lanes.closeFile(placed, { mode, uid, gid, ...mtimeOf(mtime) });
    });
  };

  return { effects, file };
}

/**
 * Resolves once `sink` has closed, destroying it first if it is still open (an extractInto() sink must be ended
 * or destroyed: its worker threads live until then). A pipeline that fails upstream
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
  const entries: ListedEntry[] = [];
  return Object.assign(
    readTar((entry) => entries.push(entry)),
    { entries },
  );
}

/** A Writable that parses a tar stream (strictly) and shows `visit` each entry as listed; nothing is kept or written. */
export function readTar(visit: (entry: ListedEntry) => void): Writable {
  let failure: Error | undefined;
  let whenEnded: (() => void) | undefined;
  const parser = new tar.Parser({ strict: true });
  parser.on('entry', (entry: tar.ReadEntry) => {
    const listed = listedPath(entry.path);
    if (listed !== '' || entry.type !== 'Directory') {
      const linkTarget = entry.linkpath ? String(entry.linkpath) : undefined;
      visit({
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
  return new Writable({
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
  });
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
        for (let offset = 0; offset < chunk.length;) offset += fs.writeSync(fd!, chunk, offset);
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
