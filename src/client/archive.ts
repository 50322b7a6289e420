/**
 * The plaintext side of a backup: a tar stream of a directory (or one file), of what scan.ts decided it holds.
 *
 * Backup:  tar (modes, mtimes to the second, empty directories, symlinks, hard links) → gzip
 * Restore: extract.ts (safe extraction into a private staging directory, then the move into the target).
 */
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform, Writable, type TransformCallback } from 'node:stream';
import * as tar from 'tar';
import { cannotRead, changedWhileRead } from './fs-errors.js';
import { type PackRoot, SOURCE_OPEN, type TreeScan, unameOf } from './scan.js';
import { BLOCK, OCTAL_12, pad512, TAR_END } from './tar-layout.js';

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
 * The tar stream leaves in chunks of this size: one read of a large file, one job of the compressor. Each stage of a
 * backup's pipeline (count and hash, compressor, encryptor, upload) holds a chunk or two of its own, so the chunk size
 * is most of what the pipeline adds to a backup's memory: 512 KiB instead of 1 MiB lowered the peak RSS of a backup
 * of bench's tree by about 4.5 MiB on Node 20 and 24, for the same CPU time (256 KiB: no lower, more CPU); P9.
 */
const PACK_CHUNK = 512 * 1024;
/** Reads at least this large go through the thread pool (a cold disk must not stall the loop); smaller ones are synchronous. */
const ASYNC_READ = 256 * 1024;

const readAsync = (fd: number, buffer: Buffer, offset: number, length: number, position: number) =>
  new Promise<number>((resolve, reject) =>
    fs.read(fd, buffer, offset, length, position, (error, n) => (error ? reject(error) : resolve(n))),
  );

/** Directories keep their search bits where they are readable (node-tar's modeFix, so archives stay the same). */
function tarMode(mode: number, isDirectory: boolean): number {
  let m = mode & 0o7777;
  if (isDirectory) {
    if (m & 0o400) m |= 0o100;
    if (m & 0o40) m |= 0o10;
    if (m & 0o4) m |= 0o1;
  }
  return m;
}

/** node-tar's octal field: zero-padded digits, then a space and a NUL (or only a NUL when the digits fill it). */
function octalField(buf: Buffer, off: number, size: number, n: number): void {
  const digits = Math.floor(n).toString(8);
  buf.write(digits.length === size - 1 ? `${digits}\0` : `${'0'.repeat(size - digits.length - 2)}${digits} \0`, off, size, 'latin1');
}

/**
 * A time node-tar can encode: one before 1970 goes into the header as a base-256 number, which must be whole
 * (node-tar throws "cannot encode number outside of javascript safe integer range" on -86400.25), so it is
 * rounded down to its second, as `tar` lists it. Later times are left as they are (and as node-tar wrote them).
 */
const tarTime = (date: Date): Date => (date.getTime() < 0 ? new Date(Math.floor(date.getTime() / 1000) * 1000) : date);

const USTAR_MAGIC = Buffer.from('ustar\u000000', 'latin1');
/** Seconds as node-tar encodes a Stats time (its Date, whole milliseconds, divided by 1000), when the field holds it. */
const plainSeconds = (ms: number): number | undefined => {
  const seconds = Math.round(ms) / 1000;
  return seconds >= 0 && seconds <= OCTAL_12 ? seconds : undefined;
};

/**
 * The header node-tar's Header.encode writes for a file or directory whose name is short ASCII and whose numbers
 * fit (the case of nearly every entry), written in place: node-tar's encoder (path.parse of every name, padded
 * strings, a new 512-byte buffer per header) is work per entry, which a tree of small files pays thousands of times.
 * Returns false for anything else (node-tar's encoder then writes it, with a pax header where one is needed).
 * pack.test.ts checks that both write the same bytes.
 */
function writePlainHeader(
  buf: Buffer,
  off: number,
  name: string,
  mode: number,
  stat: fs.Stats,
  size: number,
  typeFlag: number,
  uname: string,
): boolean {
  if (name.length >= 100 || uname.length > 31 || !/^[\x20-\x7e]*$/.test(name) || !/^[\x20-\x7e]*$/.test(uname)) return false;
  if (stat.uid > 0o7777777 || stat.gid > 0o7777777 || size > OCTAL_12) return false;
  const mtime = plainSeconds(stat.mtimeMs);
  const atime = plainSeconds(stat.atimeMs);
  const ctime = plainSeconds(stat.ctimeMs);
  if (mtime === undefined || atime === undefined || ctime === undefined) return false;
  buf.fill(0, off, off + BLOCK);
  buf.write(name, off, 100, 'latin1');
  octalField(buf, off + 100, 8, mode);
  octalField(buf, off + 108, 8, stat.uid);
  octalField(buf, off + 116, 8, stat.gid);
  octalField(buf, off + 124, 12, size);
  octalField(buf, off + 136, 12, mtime);
  buf[off + 156] = typeFlag;
  USTAR_MAGIC.copy(buf, off + 257);
  buf.write(uname, off + 265, 32, 'latin1');
  octalField(buf, off + 329, 8, 0); // device major and minor: node-tar writes zeros
  octalField(buf, off + 337, 8, 0);
  // With times given, node-tar's ustar prefix field is 130 bytes and atime and ctime follow it.
  octalField(buf, off + 476, 12, atime);
  octalField(buf, off + 488, 12, ctime);
  let sum = 8 * 0x20;
  for (let i = off; i < off + 148; i++) sum += buf[i]!;
  for (let i = off + 156; i < off + BLOCK; i++) sum += buf[i]!;
  octalField(buf, off + 148, 8, sum);
  return true;
}

/**
 * The tar stream's chunks, recycled: the stage that is done with a chunk (the compressor, once it has consumed it)
 * gives it back with release(), and the writer fills it again. A backup then holds a few chunks instead of
 * allocating one per MiB of archive, each held until the next garbage collection: its memory is bounded by its
 * pipeline, not by the collector's pace. Only chunks this pool handed out and not yet got back are taken (anything
 * else, or a second release of the same chunk, is ignored), and a chunk is never handed out while it is out.
 */
export class ChunkPool {
  private readonly free: ArrayBuffer[] = [];
  private readonly out = new WeakSet<ArrayBufferLike>();

  constructor(
    readonly size: number = PACK_CHUNK,
    /** How many free chunks are kept (more are left to the garbage collector). */
    private readonly keep = 4,
  ) {}

  get(): Buffer {
    const free = this.free.pop();
    const chunk = free ? Buffer.from(free, 0, this.size) : Buffer.allocUnsafeSlow(this.size);
    this.out.add(chunk.buffer);
    return chunk;
  }

  /** Gives back a chunk (or a view of one) handed out by get(): its bytes are never read again by the caller. */
  release(chunk: Uint8Array): void {
    const buffer = chunk.buffer;
    if (!this.out.has(buffer)) return;
    this.out.delete(buffer);
    if (this.free.length < this.keep) this.free.push(buffer as ArrayBuffer);
  }
}

/** The archive being written: one chunk filled at a time, handed on when full. */
class TarChunks {
  buf: Buffer;
  pos = 0;
  constructor(private readonly pool?: ChunkPool) {
    this.buf = this.fresh();
  }
  private fresh(): Buffer {
    return this.pool ? this.pool.get() : Buffer.allocUnsafe(PACK_CHUNK);
  }
  get room(): number {
    return PACK_CHUNK - this.pos;
  }
  /** The filled part, and a fresh chunk to go on with (the consumer keeps the old one, or gives it back to the pool). */
  take(): Buffer {
    const full = this.buf.subarray(0, this.pos);
    this.buf = this.fresh();
    this.pos = 0;
    return full;
  }
  /** Copies as much of `bytes` from `from` as fits; returns how much. */
  put(bytes: Buffer, from: number): number {
    const n = bytes.copy(this.buf, this.pos, from);
    this.pos += n;
    return n;
  }
  zero(n: number): number {
    const m = Math.min(n, this.room);
    this.buf.fill(0, this.pos, this.pos + m);
    this.pos += m;
    return m;
  }
}

/**
 * The tar stream of a scanned source: exactly the entries the scan kept, in its order, one run per source in one
 * archive. The bytes are those node-tar's packer wrote before (the same header fields, node-tar's Pax encoder,
 * hard links as Link entries to the first path of an inode within a run, two zero blocks at the end; only a time
 * before 1970 with a fraction of a second differs: node-tar could not write it at all), written by this loop
 * instead: node-tar's packer spends most of its CPU on per-file machinery (a stream, callbacks and several
 * thread-pool trips per file), and the packers of tar-fs/tar-stream and modern-tar as much, which for a tree of
 * small files outweighs its bytes. This writes each header and file straight into 512 KiB chunks, reads under
 * 256 KiB synchronous (small files, from the page cache), larger ones through the thread pool, at most 512 KiB at a
 * time and only when the consumer asks for more (the upload's backpressure reaches the reads).
 *
 * An entry that cannot be read now fails the backup (strict) rather than vanish from it, with the file named and
 * the reason in words. A file that changes while it is read fails it too: the header holds the size seen before
 * the read, so a file that ends early, or whose size, times or identity differ once its content has been read,
 * is "changed while it was read".
 *
 * With a pool, the chunks come from it (PACK_CHUNK bytes each): the consumer gives each back once it is done with it.
 */
export async function* packTree(scan: TreeScan, counts?: PackCounts, pool?: ChunkPool): AsyncGenerator<Buffer> {
  const out = new TarChunks(pool);
  for (const root of scan.roots) yield* packRoot(root, out, scan.ownerName, counts);
  for (let left = TAR_END; left > 0;) {
    if (out.room === 0) yield out.take();
    left -= out.zero(left);
  }
  if (out.pos > 0) yield out.take();
}

async function* packRoot(root: PackRoot, out: TarChunks, ownerName: string, counts?: PackCounts): AsyncGenerator<Buffer> {
  const links = new Map<string, string>();
  for (const entry of root.entries) {
    const found = entryOf(root, entry, links, counts);
    if (found === undefined) continue; // it became a FIFO, socket or device since the scan: never opened, not archived
    const { absolute, stat, name, type, linkpath, size } = found;
    let fd: number | undefined;
    let opened: fs.Stats | undefined;
    try {
      if (type === 'File' && size > 0) {
        try {
          fd = fs.openSync(absolute, SOURCE_OPEN);
          opened = fs.fstatSync(fd);
        } catch (error) {
          throw cannotRead(absolute, error);
        }
        if (!sameFile(stat, opened)) throw changedWhileRead(absolute);
      }
      const mode = tarMode(stat.mode, type === 'Directory');
      const uname = unameOf(stat.uid, ownerName);
      if (out.room === 0) yield out.take();
      if (!linkpath && writePlainHeader(out.buf, out.pos, name, mode, stat, size, type === 'Directory' ? 0x35 : 0x30, uname)) {
        out.pos += BLOCK;
      } else {
        const blocks = headerBlocks(name, linkpath, mode, stat, size, type, uname);
        for (const block of blocks) {
          for (let from = 0; from < block.length;) {
            if (out.room === 0) yield out.take();
            from += out.put(block, from);
          }
        }
      }
      if (fd === undefined) continue;
      for (let done = 0; done < size;) {
        if (out.room === 0) yield out.take();
        const want = Math.min(size - done, out.room);
        let n: number;
        try {
          n = want >= ASYNC_READ ? await readAsync(fd, out.buf, out.pos, want, done) : fs.readSync(fd, out.buf, out.pos, want, done);
        } catch (error) {
          throw cannotRead(absolute, error);
        }
        if (n === 0) throw changedWhileRead(absolute);
        out.pos += n;
        done += n;
      }
      for (let left = pad512(size) - size; left > 0;) {
        if (out.room === 0) yield out.take();
        left -= out.zero(left);
      }
      if (!sameFile(opened!, fs.fstatSync(fd))) throw changedWhileRead(absolute);
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
  }
}

/** One entry of a pack root as it is archived: its type, name, link target and content size. */
interface PackEntry {
  absolute: string;
  stat: fs.Stats;
  name: string;
  type: 'File' | 'Link' | 'Directory' | 'SymbolicLink';
  linkpath: string | undefined;
  size: number;
}

/**
 * What `entry` is now (lstat), counted in `counts`; a second name of a file with several links is a hard link to the
 * first (`links`). Undefined for what became a FIFO, socket or device since the scan.
 */
function entryOf(root: PackRoot, entry: string, links: Map<string, string>, counts?: PackCounts): PackEntry | undefined {
  const absolute = path.resolve(root.cwd, entry);
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(absolute);
  } catch (error) {
    throw cannotRead(absolute, error);
  }
  let name = entry === '' ? './' : entry;
  let type: 'File' | 'Link' | 'Directory' | 'SymbolicLink';
  let linkpath: string | undefined;
  let size = 0;
  if (stat.isDirectory()) {
    type = 'Directory';
    if (!name.endsWith('/')) name += '/';
    if (counts && name !== './') counts.directories += 1;
  } else if (stat.isSymbolicLink()) {
    type = 'SymbolicLink';
    try {
      linkpath = fs.readlinkSync(absolute);
    } catch (error) {
      throw cannotRead(absolute, error);
    }
    if (counts) counts.symlinks += 1;
  } else if (stat.isFile()) {
    type = 'File';
    size = stat.size;
    if (stat.nlink > 1) {
      const key = `${stat.dev}:${stat.ino}`;
      const first = links.get(key);
      if (first === undefined) links.set(key, absolute);
      else {
        type = 'Link';
        linkpath = path.relative(root.cwd, first);
        size = 0;
      }
    }
    if (counts) counts.files += 1;
  } else return undefined;
  return { absolute, stat, name, type, linkpath, size };
}

/** The header blocks of an entry that the plain ustar header cannot hold: a pax header when needed, then the header. */
function headerBlocks(
  name: string,
  linkpath: string | undefined,
  mode: number,
  stat: fs.Stats,
  size: number,
  type: PackEntry['type'],
  uname: string,
): Buffer[] {
  const header = new tar.Header({
    path: name,
    linkpath,
    mode,
    uid: stat.uid,
    gid: stat.gid,
    size,
    mtime: tarTime(stat.mtime),
    type,
    uname,
    atime: tarTime(stat.atime),
    ctime: tarTime(stat.ctime),
  });
  const blocks: Buffer[] = [];
  if (header.encode()) {
    blocks.push(
      new tar.Pax({
        atime: header.atime,
        ctime: header.ctime,
        gid: header.gid,
        mtime: header.mtime,
        path: name,
        linkpath,
        size: header.size,
        uid: header.uid,
        uname: header.uname,
        dev: stat.dev,
        ino: stat.ino,
        nlink: stat.nlink,
      }).encode(),
    );
  }
  blocks.push(header.block!);
  return blocks;
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
