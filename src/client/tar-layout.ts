/**
 * What the tar stream of packTree (archive.ts) is made of: 512-byte blocks, two zero blocks at the end, the limits
 * of a plain ustar header; and from them the upper bound of a stream's size that the scan (scan.ts) computes
 * before anything is read.
 */
import type fs from 'node:fs';

export const BLOCK = 512;
export const pad512 = (n: number) => Math.ceil(n / BLOCK) * BLOCK;
/** node-tar ends every archive with exactly two zero blocks (no record padding). */
export const TAR_END = 2 * BLOCK;

/** What node-tar's header encoder (used by packTree) can write without a pax extended header. */
export const OCTAL_12 = 0o77777777777;
const inOctal12 = (n: number) => n >= 0 && n <= OCTAL_12;
const plainTime = (stat: fs.Stats) => inOctal12(stat.mtimeMs / 1000) && inOctal12(stat.atimeMs / 1000) && inOctal12(stat.ctimeMs / 1000);

/** An upper bound of the size of a tar stream, entry by entry (headers, long-name extensions, padding). */
export class TarSizeBound {
  bytes = TAR_END + 20 * BLOCK; // end-of-archive blocks + record padding

  /** One entry, archived as `entryPath` with `uname` as its owner's name: its header(s) and a file's content. */
  add(entryPath: string, stat: fs.Stats, uname: string): void {
    // One header block. A pax header (3 blocks + the names it carries) is possible only for long or non-ASCII
    // names, hard links (their target's name), symlinks (their target may be long), and numbers or a user name
    // the ustar fields cannot hold. The bound stays close to the real tar: a tree whose bound passes the size limit
    // costs a dry run (a second tar and compression pass) even when it fits.
    const plainHeader =
      (stat.isDirectory() || (stat.isFile() && stat.nlink === 1)) &&
      /^[\x20-\x7e]{0,99}$/.test(entryPath) &&
      stat.uid <= 0o7777777 &&
      stat.gid <= 0o7777777 &&
      stat.size <= OCTAL_12 &&
      plainTime(stat) &&
      /^[\x20-\x7e]{0,31}$/.test(uname);
    if (!plainHeader) {
      // A hard link's target is another entry of the same run: no longer than the longest name seen (bounded by
      // PATH_MAX); a symlink's is its size.
      const linkBytes = stat.isSymbolicLink() ? stat.size : stat.isFile() ? 4096 : 0;
      this.bytes += 4 * BLOCK + pad512(Buffer.byteLength(entryPath) + linkBytes + Buffer.byteLength(uname));
    } else this.bytes += BLOCK;
    if (stat.isFile()) this.bytes += pad512(stat.size);
  }
}
