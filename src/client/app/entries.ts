/**
 * Named entries ⇄ the tar stream of a `tar` backup (docs/crypto.md §4), platform-neutral: web streams, Uint8Array,
 * async iterables, no Node built-in. packEntries writes what the CLI's restore reads (ustar headers, a pax header
 * for a long or non-ASCII name, two zero blocks at the end: ../tar-layout.ts); readEntries reads any such stream,
 * including the CLI's own backups (directories, symlinks, hard links), and refuses a malformed or unsafe one with
 * TarFormatError instead of guessing.
 */
import { BLOCK, chunksOf, MAX_NAME_BYTES, OCTAL_12, pad512, utf8 } from './tar-format.js';

export { readEntries } from './entries-read.js';
export { TarFormatError } from './tar-format.js';

/** The data of an entry to back up. */
export type EntryData = Uint8Array | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

/** One named entry to back up: a file of the archive. */
export interface NamedEntry {
  /** Its path in the archive: relative, `/`-separated, no `.` or `..` segment (e.g. `db/dump.sql`). */
  name: string;
  data: EntryData;
  /**
   * Its size in bytes. Known for bytes and a Blob; for a stream or an iterable, give it to stream the entry (the
   * data must then be exactly this long), or leave it out and the entry is held in memory to be measured.
   */
  size?: number;
  /** Its modification time (default: now). */
  mtime?: Date;
  /** Its permission bits (default 0o644). */
  mode?: number;
}

/** One entry read back from a backup. */
export interface ArchiveEntry {
  /** Its path in the archive (relative, `/`-separated; a directory's without a trailing slash). */
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'link';
  /** The content's size in bytes (0 for anything but a file). */
  size: number;
  mtime: Date;
  mode: number;
  /** A symlink's target, or a hard link's (the name of an earlier entry). */
  linkTarget?: string;
  /**
   * The content. Read it (or cancel it) before asking for the next entry; an entry left unread is skipped when
   * the next one is asked for.
   */
  stream: ReadableStream<Uint8Array>;
}

// ---- packing ----

/**
 * A name as it goes into the archive, or TypeError: relative, `/`-separated, no empty, `.` or `..` segment, no NUL
 * or backslash, no drive letter (`C:`), at most MAX_NAME_BYTES.
 */
export function archiveName(name: string): string {
  const segments = name.split('/');
  const bad =
    name.length === 0 ||
    utf8.encode(name).length > MAX_NAME_BYTES ||
    name.includes('\0') ||
    name.includes('\\') ||
    /^[A-Za-z]:/.test(name) ||
    segments.some((segment) => segment === '' || segment === '.' || segment === '..');
  if (bad) throw new TypeError(`the entry name ${JSON.stringify(name)} is not a relative path of plain segments`);
  return name;
}

function octal(into: Uint8Array, at: number, length: number, value: number): void {
  const text = Math.floor(value)
    .toString(8)
    .padStart(length - 1, '0');
  into.set(utf8.encode(text), at);
  into[at + length - 1] = 0;
}

/** A pax record "<length> key=value\n", its length counting itself. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const bodyBytes = utf8.encode(body).length;
  const digits = String(bodyBytes).length;
  const length = String(bodyBytes + digits).length > digits ? bodyBytes + digits + 1 : bodyBytes + digits;
  return `${length}${body}`;
}

interface HeaderFields {
  name: string;
  size: number;
  mtime: number;
  mode: number;
  type: '0' | '5' | 'x';
}

function headerBlock(fields: HeaderFields): Uint8Array {
  const block = new Uint8Array(BLOCK);
  block.set(utf8.encode(fields.name).subarray(0, 100), 0);
  octal(block, 100, 8, fields.mode);
  octal(block, 108, 8, 0);
  octal(block, 116, 8, 0);
  octal(block, 124, 12, fields.size);
  octal(block, 136, 12, fields.mtime);
  block[156] = fields.type.charCodeAt(0);
  block.set(utf8.encode('ustar\u000000'), 257);
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.set(utf8.encode(`${sum.toString(8).padStart(6, '0')}\u0000 `), 148);
  return block;
}

/** The header(s) of one entry: a pax header first when the name or a number does not fit ustar's fields. */
export function entryHeader(name: string, size: number, mtime: Date, mode = 0o644, type: '0' | '5' = '0'): Uint8Array {
  const seconds = Math.floor(mtime.getTime() / 1000);
  const records: string[] = [];
  const plainName = /^[\x20-\x7e]{1,99}$/.test(name);
  if (!plainName) records.push(paxRecord('path', name));
  if (size > OCTAL_12) records.push(paxRecord('size', String(size)));
  if (seconds < 0 || seconds > OCTAL_12) records.push(paxRecord('mtime', String(seconds)));
  const header = headerBlock({
    name: plainName ? name : fallbackName(name),
    size: size > OCTAL_12 ? 0 : size,
    mtime: Math.min(Math.max(seconds, 0), OCTAL_12),
    mode: mode & 0o7777,
    type,
  });
  if (records.length === 0) return header;
  const pax = utf8.encode(records.join(''));
  const paxHeader = headerBlock({ name: 'PaxHeader', size: pax.length, mtime: Math.max(seconds, 0) % OCTAL_12, mode: 0o644, type: 'x' });
  const out = new Uint8Array(BLOCK + pad512(pax.length) + BLOCK);
  out.set(paxHeader, 0);
  out.set(pax, BLOCK);
  out.set(header, BLOCK + pad512(pax.length));
  return out;
}

/** The ustar name field of an entry whose real name is in its pax header: its ASCII, cut to 99 bytes. */
const fallbackName = (name: string) => name.replace(/[^\x20-\x7e]/g, '_').slice(-99) || '_';

const knownSize = (data: EntryData): number | undefined =>
  data instanceof Uint8Array ? data.length : typeof Blob !== 'undefined' && data instanceof Blob ? data.size : undefined;

async function collect(data: EntryData): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of chunksOf(data)) {
    parts.push(chunk);
    total += chunk.length;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** Counts of what packEntries wrote. */
export interface PackedCounts {
  files: number;
  directories: number;
}

/** The tar stream of one entry: header(s), content (checked against the declared size), padding. */
async function* packEntry(entry: NamedEntry, seen: Set<string>, counts: PackedCounts): AsyncGenerator<Uint8Array> {
  const name = archiveName(entry.name);
  if (seen.has(name)) throw new TypeError(`the entry name ${JSON.stringify(name)} is given twice`);
  seen.add(name);
  let data = entry.data;
  let size = knownSize(data) ?? entry.size;
  if (size === undefined) {
    data = await collect(data);
    size = data.length;
  }
  if (!Number.isSafeInteger(size) || size < 0) throw new TypeError(`the entry ${name} has no valid size`);
  yield entryHeader(name, size, entry.mtime ?? new Date(), entry.mode ?? 0o644);
  let written = 0;
  for await (const chunk of chunksOf(data)) {
    written += chunk.length;
    if (written > size) break;
    if (chunk.length > 0) yield chunk;
  }
  if (written !== size)
    throw new TypeError(`the entry ${name} declared ${size} bytes but its data had ${written > size ? 'more' : written}`);
  if (pad512(size) > size) yield new Uint8Array(pad512(size) - size);
  counts.files += 1;
}

/**
 * The tar stream of named entries, in their order, ending with two zero blocks. Entries are streamed one after the
 * other (only an entry of unknown size is held in memory), after the archive's root directory (`./`). Throws TypeError for a bad or repeated name or a size
 * that the data does not match.
 */
export async function* packEntries(
  entries: AsyncIterable<NamedEntry> | Iterable<NamedEntry>,
  counts: PackedCounts = { files: 0, directories: 0 },
): AsyncGenerator<Uint8Array> {
  const seen = new Set<string>();
  // The archive's root first, as the CLI writes it (node-tar reads no archive without an entry).
  yield entryHeader('./', 0, new Date(), 0o755, '5');
  for await (const entry of entries) yield* packEntry(entry, seen, counts);
  yield new Uint8Array(2 * BLOCK);
}
