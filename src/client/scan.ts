/**
 * What goes into a backup: one walk of the sources (lstat, no symlink following) that decides the entries of the
 * archive, counts them and bounds the tar stream's size, before anything is read or uploaded. packTree
 * (archive.ts) then writes exactly those entries.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { SkippedEntry } from './envelope-format.js';
import { cannotRead, fsReason, SourceReadError } from './fs-errors.js';
import { ExcludeRules, IGNORE_FILE } from './select.js';
import { TarSizeBound } from './tar-layout.js';

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
  /** The user name archived as the owner of this user's files (ScanOptions.ownerName); '' for none. */
  ownerName: string;
}

export interface ScanOptions {
  /** The user name archived as the owner of this user's files (the CLI passes the OS user's); default none. */
  ownerName?: string;
  /** gitignore-style patterns, relative to each backed-up directory (`--exclude`, `--exclude-file`). */
  exclude?: readonly string[];
  /** Honour `.cofferignore` files inside the tree (default true). */
  ignoreFiles?: boolean;
  /** Leave out what cannot be read (listed in `skipped`) instead of failing. */
  skipUnreadable?: boolean;
  signal?: AbortSignal;
}

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
  stat.isFIFO()
    ? 'a FIFO'
    : stat.isSocket()
      ? 'a socket'
      : stat.isCharacterDevice() || stat.isBlockDevice()
        ? 'a device'
        : 'of an unknown type';

/** Flags of every open of a source file: never through a symlink, never waiting (a FIFO put in a file's place). */
export const SOURCE_OPEN = fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW;

/** Opens (never reads) a regular file to learn whether it can be read. */
function readable(file: string): unknown {
  try {
    fs.closeSync(fs.openSync(file, SOURCE_OPEN));
    return undefined;
  } catch (error) {
    return error;
  }
}

/** The scan gives the event loop a turn (signals, an abort, progress) after this many entries. */
const SCAN_SLICE = 512;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

const myUid = process.getuid?.() ?? 0;
/** The user name packTree writes for an owner: this user's (`ownerName`, TreeScan.ownerName), or none. */
export const unameOf = (uid: number, ownerName: string) => (uid === myUid ? ownerName : '');

/** A named source as it is archived: symlinks to a directory followed (like `tar -H`, `cp -H`). */
async function resolveSource(given: string): Promise<{ absolute: string; stat: fs.Stats }> {
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
  return { absolute, stat };
}

/** One scan in progress: the result so far, the size bound, what could not be read. */
class Scan {
  readonly result: TreeScan = {
    kind: 'directory',
    sources: [],
    roots: [],
    files: 0,
    directories: 0,
    symlinks: 0,
    fileBytes: 0,
    tarBoundBytes: 0,
    excluded: 0,
    skipped: [],
    ownerName: '',
  };
  readonly bound = new TarSizeBound();
  readonly unreadable: SkippedEntry[] = [];
  private sinceTurn = 0;

  constructor(readonly options: ScanOptions) {
    this.result.ownerName = options.ownerName ?? '';
  }

  cannot(file: string, error: unknown): void {
    this.unreadable.push({ path: file, reason: fsReason(error) });
  }

  async turn(): Promise<void> {
    if (++this.sinceTurn < SCAN_SLICE) return;
    this.sinceTurn = 0;
    await nextTurn();
    this.options.signal?.throwIfAborted();
  }

  count(entryPath: string, stat: fs.Stats): void {
    this.bound.add(entryPath, stat, unameOf(stat.uid, this.result.ownerName));
    if (stat.isDirectory()) this.result.directories += 1;
    else if (stat.isSymbolicLink()) this.result.symlinks += 1;
    else if (stat.isFile()) {
      this.result.files += 1;
      this.result.fileBytes += stat.size;
    }
  }

  lstatOrNote(file: string): fs.Stats | undefined {
    try {
      return fs.lstatSync(file);
    } catch (error) {
      this.cannot(file, error);
      return undefined;
    }
  }

  /** The rules of directory `dir` (archive-relative `relative`): `outer` and its `.cofferignore`, when honoured and not excluded. */
  rulesIn(dir: string, relative: string, children: string[], outer: ExcludeRules): ExcludeRules {
    if (!(this.options.ignoreFiles ?? true) || !children.includes(IGNORE_FILE)) return outer;
    const rulesPath = relative === '' ? IGNORE_FILE : `${relative}/${IGNORE_FILE}`;
    const file = `${dir}/${IGNORE_FILE}`;
    let ruleStat: fs.Stats | undefined;
    try {
      ruleStat = fs.lstatSync(file);
    } catch {
      // Unreadable rules: the walk below names the file when it cannot read it.
    }
    if (!ruleStat?.isFile() || outer.excludes(rulesPath, false)) return outer;
    let text: string | undefined;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      this.cannot(file, error);
    }
    return text !== undefined ? outer.with(relative, text) : outer;
  }

  /** Adds what directory `dir` holds (its `children`) under `top` to `entries`, depth first, in name order. */
  async walk(top: string, entries: string[], dir: string, relative: string, children: string[], outer: ExcludeRules): Promise<void> {
    this.options.signal?.throwIfAborted();
    const rules = this.rulesIn(dir, relative, children, outer);
    for (const name of children.sort()) {
      await this.turn();
      const full = `${dir}/${name}`;
      const rel = relative === '' ? name : `${relative}/${name}`;
      const entryStat = this.lstatOrNote(full);
      if (!entryStat) continue;
      const isDirectory = entryStat.isDirectory();
      if (rules.excludes(rel, isDirectory)) {
        this.result.excluded += 1;
        continue;
      }
      const entry = `${top}/${rel}`;
      if (isDirectory) {
        let below: string[];
        try {
          below = fs.readdirSync(full);
        } catch (error) {
          this.cannot(full, error);
          continue;
        }
        entries.push(entry);
        this.count(entry, entryStat);
        await this.walk(top, entries, full, rel, below, rules);
      } else if (entryStat.isFile()) {
        const problem = readable(full);
        if (problem) {
          this.cannot(full, problem);
          continue;
        }
        entries.push(entry);
        this.count(entry, entryStat);
      } else if (entryStat.isSymbolicLink()) {
        entries.push(entry);
        this.count(entry, entryStat);
      } else {
        this.result.skipped.push({ path: full, reason: `${special(entryStat)}: not archived` });
      }
    }
  }

  /** One named source, archived under `top` in a run in `cwd`. */
  async addSource(absolute: string, stat: fs.Stats, cwd: string, top: string, several: boolean): Promise<void> {
    this.result.sources.push(absolute);
    if (!stat.isDirectory()) {
      const problem = stat.isFile() ? readable(absolute) : undefined;
      if (problem) throw cannotRead(absolute, problem);
      this.result.kind = several ? 'directory' : 'file';
      this.result.roots.push({ cwd, entries: [top] });
      this.count(top, stat);
      return;
    }
    let rootNames: string[];
    try {
      rootNames = fs.readdirSync(absolute);
    } catch (error) {
      throw cannotRead(absolute, error);
    }
    const entries: string[] = [top];
    this.count(top, stat);
    await this.walk(top, entries, absolute === '/' ? '' : absolute, '', rootNames, ExcludeRules.of(this.options.exclude ?? []));
    this.result.roots.push({ cwd, entries });
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
 *
 * The system calls are synchronous: from the page cache an lstat or an open takes microseconds, a trip through
 * libuv's thread pool (fs.promises) ten to a hundred times that, so a scan that awaited each call would spend its
 * time in the trips, not in the calls. The event loop gets a turn every SCAN_SLICE entries.
 */
export async function scanTree(source: string | readonly string[], options: ScanOptions = {}): Promise<TreeScan> {
  const sources = typeof source === 'string' ? [source] : [...source];
  if (sources.length === 0) throw new Error('nothing to back up: no path given');
  const several = sources.length > 1;
  const scan = new Scan(options);
  const names = new Map<string, string>();
  for (const given of sources) {
    const { absolute, stat } = await resolveSource(given);
    const cwd = stat.isDirectory() && !several ? absolute : path.dirname(absolute);
    const top = stat.isDirectory() && !several ? '.' : path.basename(absolute);
    if (several) {
      if (top === '' || top === '.' || top === '..')
        throw new Error(`${given} cannot be backed up together with other paths: it has no name`);
      const earlier = names.get(top);
      if (earlier !== undefined) {
        throw new Error(`${earlier} and ${given} would both be stored as "${top}": back them up separately (or back up their parent)`);
      }
      names.set(top, given);
    }
    await scan.addSource(absolute, stat, cwd, top, several);
  }
  const { result, unreadable } = scan;
  result.tarBoundBytes = scan.bound.bytes;
  if (unreadable.length > 0) {
    if (!options.skipUnreadable) throw new UnreadableSourceError(unreadable);
    result.skipped.unshift(...unreadable.map((u) => ({ path: u.path, reason: `cannot be read: ${u.reason}` })));
  }
  return result;
}
