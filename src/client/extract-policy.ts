/**
 * The entry policy of the extractor (extract.ts): what each tar entry makes in staging, which parents it needs,
 * and which entries are refused. Pure and synchronous: it keeps the record of what was made (the only truth paths
 * are resolved against) and asks its `Effects` to do each creation, in archive order; extractInto() turns those
 * into file-system jobs. extractInto()'s comment lists the rules; test/client/extract-policy.test.ts checks them.
 */
import type { SkippedEntry } from './envelope-format.js';
import { IntegrityError } from './envelope.js';

/** A refused archive entry: the archive decrypted fine but is not safe to write. */
export class UnsafeArchiveError extends IntegrityError {}

const RESTORED_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

export const SEPARATORS = process.platform === 'win32' ? /[/\\]+/ : /\/+/;

export const unsafe = (reason: string, p: unknown) => new UnsafeArchiveError(`refusing archive entry ${reason}: ${JSON.stringify(p)}`);

/** `p` as archive-relative segments, or a reason it is unsafe. */
export function segments(p: string, field: string): string[] {
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
export type Made = ({ kind: 'directory' } | { kind: 'file' } | { kind: 'symlink'; target: string }) & {
  /** An entry of the archive that a partial restore did not write (its kind still rules what may follow). */
  skipped?: boolean;
};

/** The fields of a tar entry the policy reads (tar.ReadEntry has them). */
export interface PolicyEntry {
  path: string;
  type: string;
  linkpath?: string;
  mode?: number;
  mtime?: Date;
  uid?: number;
  gid?: number;
}

/** The creations the policy allows, in archive order (extractInto() queues them for its workers). */
export interface Effects {
  /** A directory: a missing parent (mode 0o755) or a directory entry (0o700: owner-writable until placeTree). */
  mkdir(parts: string[], shown: string, mode: number): void;
  /** A symlink, verbatim (an entry, or a hard link to a symlink of the archive). */
  symlink(parts: string[], target: string, entry: PolicyEntry): void;
  /** A hard link to `target`, an earlier file of the archive. */
  link(parts: string[], target: string[], shown: string): void;
}

/**
 * The record of one extraction. `admit(entry)` checks an entry against what was made before it, records it, calls
 * the effects that create it and returns the parts of a regular file whose content follows (undefined for
 * anything else); it throws UnsafeArchiveError to refuse the entry.
 */
export class EntryPolicy {
  readonly made = new Map<string, Made>([['', { kind: 'directory' }]]);
  /** Archived attributes of the directories written (by archive-relative key), for placeTree(). */
  readonly directories = new Map<string, DirectoryAttributes>();
  /** Directories of the archive left out by `select`, kept in case a selected entry lies below one. */
  readonly unselected = new Map<string, DirectoryAttributes>();
  /** Entries written. */
  entries = 0;
  /** Selected entries that could not be restored (a hard link to a file outside the selection). */
  readonly skipped: SkippedEntry[] = [];

  constructor(
    private readonly effects: Effects,
    private readonly select?: (relative: string, isDirectory: boolean) => boolean,
  ) {}

  /** Resolves the parents of `parts` against `made`, creating missing ones (when allowed). */
  private parents(parts: string[], shown: string, createMissing: boolean) {
    for (let i = 1; i < parts.length; i++) {
      const key = parts.slice(0, i).join('/');
      const known = this.made.get(key);
      if (known?.kind === 'directory' && !known.skipped) continue;
      if (known?.kind === 'symlink') throw unsafe('that would be written through a symlink', shown);
      if (known?.kind === 'file') throw unsafe('below a file', shown);
      if (!known && !createMissing) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
      // A missing parent, or a directory of the archive that the selection left out: made now, with the
      // archived attributes when the archive had it.
      this.effects.mkdir(parts.slice(0, i), shown, 0o755);
      this.made.set(key, { kind: 'directory' });
      const attributes = this.unselected.get(key);
      if (attributes) this.directories.set(key, attributes);
    }
  }

  private symlink(parts: string[], target: string, entry: PolicyEntry) {
    if (target === '' || target.includes('\0')) throw unsafe('with an empty or NUL-bearing symlink target', entry.path);
    this.made.set(parts.join('/'), { kind: 'symlink', target });
    this.effects.symlink(parts, target, entry);
  }

  /**
   * An entry the selection leaves out: nothing is written, but it is checked and recorded like a written one,
   * so the refusals of a partial restore are those of a full one (nothing may replace it or lie below a
   * symlink or a file of the archive).
   */
  private skip(parts: string[], key: string, entry: PolicyEntry) {
    const made = this.made;
    for (let i = 1; i < parts.length; i++) {
      const known = made.get(parts.slice(0, i).join('/'));
      if (known?.kind === 'symlink') throw unsafe('that would be written through a symlink', entry.path);
      if (known?.kind === 'file') throw unsafe('below a file', entry.path);
    }
    const known = made.get(key);
    if (known && !(known.kind === 'directory' && entry.type === 'Directory')) throw unsafe('that replaces an earlier entry', entry.path);
    if (entry.type === 'Directory') {
      if (!known) made.set(key, { kind: 'directory', skipped: true });
      const attributes = {
        path: key,
        mode: (entry.mode ?? 0o755) & 0o7777,
        mtime: entry.mtime ?? new Date(),
        uid: entry.uid,
        gid: entry.gid,
      };
      if (made.get(key)?.skipped) this.unselected.set(key, attributes);
      else this.directories.set(key, attributes);
    } else if (entry.type === 'SymbolicLink') {
      const target = String(entry.linkpath ?? '');
      if (target === '' || target.includes('\0')) throw unsafe('with an empty or NUL-bearing symlink target', entry.path);
      made.set(key, { kind: 'symlink', target, skipped: true });
    } else if (entry.type === 'Link') {
      const shown = String(entry.linkpath ?? '');
      const linked = made.get(segments(shown, 'hard link target').join('/'));
      if (!linked) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
      if (linked.kind === 'directory') throw unsafe('that is a hard link to a directory', entry.path);
      made.set(
        key,
        linked.kind === 'symlink' ? { kind: 'symlink', target: linked.target, skipped: true } : { kind: 'file', skipped: true },
      );
    } else made.set(key, { kind: 'file', skipped: true });
  }

  admit(entry: PolicyEntry): string[] | undefined {
    const made = this.made;
    const parts = segments(entry.path, 'path');
    if (!RESTORED_TYPES.has(entry.type)) return undefined; // devices, FIFOs: not restored
    if (parts.length === 0) {
      if (entry.type === 'Directory') return undefined; // the archive root ('./') itself
      throw unsafe('without a name', entry.path);
    }
    const key = parts.join('/');
    if (this.select && !this.select(key, entry.type === 'Directory')) {
      this.skip(parts, key, entry);
      return undefined;
    }
    this.parents(parts, entry.path, true);
    const known = made.get(key);
    if (known && !(known.kind === 'directory' && entry.type === 'Directory')) throw unsafe('that replaces an earlier entry', entry.path);
    this.entries += 1;
    switch (entry.type) {
      case 'Directory':
        if (!known || known.skipped) {
          this.effects.mkdir(parts, entry.path, 0o700);
          made.set(key, { kind: 'directory' });
        }
        this.directories.set(key, {
          path: key,
          mode: (entry.mode ?? 0o755) & 0o7777,
          mtime: entry.mtime ?? new Date(),
          uid: entry.uid,
          gid: entry.gid,
        });
        return undefined;
      case 'SymbolicLink':
        this.symlink(parts, String(entry.linkpath ?? ''), entry);
        return undefined;
      case 'Link': {
        const shown = String(entry.linkpath ?? '');
        const target = segments(shown, 'hard link target');
        const early = made.get(target.join('/'));
        if (early?.kind === 'file' && early.skipped) {
          // Its content was not written: there is nothing to link to (its parents were checked when it passed).
          this.entries -= 1;
          this.skipped.push({ path: key, reason: `a hard link to ${target.join('/')}, which the selection leaves out (include it too)` });
          return undefined;
        }
        this.parents(target, shown, false);
        const linked = made.get(target.join('/'));
        if (!linked) throw unsafe('whose hard link target is not an earlier entry of the archive', shown);
        if (linked.kind === 'directory') throw unsafe('that is a hard link to a directory', entry.path);
        if (linked.kind === 'symlink') this.symlink(parts, linked.target, entry);
        else {
          // The target is an earlier file: its creation comes first (its content may still be on its way).
          made.set(key, { kind: 'file' });
          this.effects.link(parts, target, entry.path);
        }
        return undefined;
      }
      default:
        made.set(key, { kind: 'file' });
        return parts;
    }
  }
}
