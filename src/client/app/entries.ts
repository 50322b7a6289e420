/**
 * Named entries ⇄ the tar stream of a `tar` backup (docs/crypto.md §4), platform-neutral: web streams, Uint8Array,
 * async iterables, no Node built-in. packEntries writes what the CLI's restore reads (ustar headers, a pax header
 * for a long or non-ASCII name, two zero blocks at the end: ../tar-layout.ts); readEntries reads any such stream,
 * including the CLI's own backups (directories, symlinks, hard links), and refuses a malformed or unsafe one with
 * TarFormatError instead of guessing.
 */
import { IntegrityError } from '../envelope-format.js';

/** The 512-byte block of tar (../tar-layout.ts BLOCK, repeated here: that module is Node-typed). */
const BLOCK = 512;
const pad512 = (n: number) => Math.ceil(n / BLOCK) * BLOCK;
/** The largest number an ustar octal field of 12 bytes holds. */
const OCTAL_12 = 0o77777777777;
/** The largest pax extended header read (a name and a few numbers; anything larger is no archive of ours). */
const MAX_PAX_BYTES = 1024 * 1024;
/** The longest name accepted (Linux PATH_MAX). */
const MAX_NAME_BYTES = 4096;

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

/** A tar stream that is malformed, truncated, or names an entry outside the archive's root. */
export class TarFormatError extends IntegrityError {
  override readonly name = 'TarFormatError';
}

const utf8 = new TextEncoder();

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

async function* chunksOf(data: EntryData): AsyncGenerator<Uint8Array> {
  if (data instanceof Uint8Array) yield data;
  else if (typeof Blob !== 'undefined' && data instanceof Blob) yield* chunksOf(data.stream());
  else if (data instanceof ReadableStream) {
    const reader = data.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        yield value;
      }
    } finally {
      reader.releaseLock();
    }
  } else yield* data as AsyncIterable<Uint8Array>;
}

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

// ---- reading ----

/** Reads a byte source exactly: whole blocks, or a content's pieces as they come. */
class ByteReader {
  private held: Uint8Array = new Uint8Array(0);
  private done = false;

  constructor(private readonly source: AsyncIterator<Uint8Array>) {}

  private async fill(): Promise<boolean> {
    while (!this.done && this.held.length === 0) {
      const next = await this.source.next();
      if (next.done) this.done = true;
      else this.held = next.value;
    }
    return this.held.length > 0;
  }

  /** Up to `max` bytes (at least 1), or undefined at the end. */
  async some(max: number): Promise<Uint8Array | undefined> {
    if (!(await this.fill())) return undefined;
    const piece = this.held.subarray(0, max);
    this.held = this.held.subarray(piece.length);
    return piece;
  }

  /** Exactly `length` bytes; undefined at the end when none came; TarFormatError when the end cuts them short. */
  async exact(length: number, what: string): Promise<Uint8Array | undefined> {
    const out = new Uint8Array(length);
    let at = 0;
    while (at < length) {
      const piece = await this.some(length - at);
      if (!piece) {
        if (at === 0) return undefined;
        throw new TarFormatError(`the archive is truncated in ${what}`);
      }
      out.set(piece, at);
      at += piece.length;
    }
    return out;
  }

  async skip(length: number, what: string): Promise<void> {
    for (let left = length; left > 0;) {
      const piece = await this.some(left);
      if (!piece) throw new TarFormatError(`the archive is truncated in ${what}`);
      left -= piece.length;
    }
  }

  async close(): Promise<void> {
    await this.source.return?.();
  }
}

const latin1 = new TextDecoder('latin1');
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A NUL-terminated text field. */
function textField(block: Uint8Array, at: number, length: number): string {
  const field = block.subarray(at, at + length);
  const end = field.indexOf(0);
  const bytes = end < 0 ? field : field.subarray(0, end);
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return latin1.decode(bytes);
  }
}

/** A numeric field: octal digits (space/NUL padded), or base-256 (first byte 0x80) for a large value. */
function numberField(block: Uint8Array, at: number, length: number, what: string): number {
  const field = block.subarray(at, at + length);
  if (field[0] === 0x80) {
    let value = 0;
    for (const byte of field.subarray(1)) value = value * 256 + byte;
    if (!Number.isSafeInteger(value)) throw new TarFormatError(`the ${what} field is out of range`);
    return value;
  }
  const text = latin1
    .decode(field)
    .replace(/[\0 ]+$/, '')
    .replace(/^ +/, '');
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarFormatError(`the ${what} field is not a number`);
  return parseInt(text, 8);
}

function checksumMatches(block: Uint8Array): boolean {
  const stored = numberField(block, 148, 8, 'checksum');
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const byte = i >= 148 && i < 156 ? 0x20 : block[i]!;
    unsigned += byte;
    signed += byte > 127 ? byte - 256 : byte;
  }
  return stored === unsigned || stored === signed;
}

/** The records of a pax extended header (`<length> key=value\n` …). */
function paxRecords(bytes: Uint8Array): Map<string, string> {
  const records = new Map<string, string>();
  let at = 0;
  while (at < bytes.length) {
    if (bytes[at] === 0) break; // padding
    const space = bytes.indexOf(0x20, at);
    const lengthText = space < 0 ? '' : latin1.decode(bytes.subarray(at, space));
    const length = /^[1-9][0-9]{0,7}$/.test(lengthText) ? Number(lengthText) : NaN;
    if (!(length > lengthText.length + 1) || at + length > bytes.length || bytes[at + length - 1] !== 0x0a) {
      throw new TarFormatError('a pax header record is malformed');
    }
    let record: string;
    try {
      record = strictUtf8.decode(bytes.subarray(space + 1, at + length - 1));
    } catch {
      throw new TarFormatError('a pax header record is not UTF-8');
    }
    const equals = record.indexOf('=');
    if (equals <= 0) throw new TarFormatError('a pax header record has no key');
    records.set(record.slice(0, equals), record.slice(equals + 1));
    at += length;
  }
  return records;
}

/** A name of the archive, normalized (no leading `./`, no trailing `/`); TarFormatError for one outside the root. */
function safeName(raw: string): string {
  const name = raw.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
  if (name === '' || name === '.') return ''; // the archive's root
  const segments = name.split('/');
  const unsafe =
    raw.startsWith('/') ||
    name.includes('\0') ||
    /^[A-Za-z]:/.test(name) ||
    name.includes('\\') ||
    segments.some((segment) => segment === '..' || segment === '');
  if (unsafe) throw new TarFormatError(`the archive names an entry outside its root: ${JSON.stringify(raw)}`);
  return name;
}

const TYPES: Record<string, ArchiveEntry['type'] | undefined> = {
  '0': 'file',
  '\0': 'file',
  '7': 'file',
  '5': 'directory',
  '2': 'symlink',
  '1': 'link',
};

/** The extended attributes that apply to the next header (pax 'x', GNU long name/link 'L'/'K'). */
interface Pending {
  path?: string;
  linkpath?: string;
  size?: number;
  mtime?: number;
}

async function extendedText(reader: ByteReader, size: number, what: string): Promise<Uint8Array> {
  if (size > MAX_PAX_BYTES) throw new TarFormatError(`the archive's ${what} is larger than ${MAX_PAX_BYTES} bytes`);
  const bytes = (await reader.exact(size, what)) ?? new Uint8Array(0);
  if (bytes.length < size) throw new TarFormatError(`the archive is truncated in its ${what}`);
  await reader.skip(pad512(size) - size, what);
  return bytes;
}

function applyPax(pending: Pending, records: Map<string, string>): void {
  const path = records.get('path');
  const linkpath = records.get('linkpath');
  const size = records.get('size');
  const mtime = records.get('mtime');
  if (path !== undefined) pending.path = path;
  if (linkpath !== undefined) pending.linkpath = linkpath;
  if (size !== undefined) {
    if (!/^[0-9]{1,15}$/.test(size)) throw new TarFormatError('a pax size is not a number');
    pending.size = Number(size);
  }
  if (mtime !== undefined) {
    const seconds = Number(mtime);
    if (!Number.isFinite(seconds)) throw new TarFormatError('a pax mtime is not a number');
    pending.mtime = seconds;
  }
}

/** A stream of the next `size` content bytes of `reader`; `finished` resolves once they were all taken. */
function contentStream(reader: ByteReader, size: number, name: string): { stream: ReadableStream<Uint8Array>; drain: () => Promise<void> } {
  let left = size;
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (left === 0) return controller.close();
        const piece = await reader.some(Math.min(left, 64 * 1024));
        if (!piece) throw new TarFormatError(`the archive is truncated in the content of ${name}`);
        left -= piece.length;
        controller.enqueue(piece.slice());
        if (left === 0) controller.close();
      },
      cancel() {
        cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  const drain = async () => {
    if (!cancelled && left > 0 && !stream.locked) await stream.cancel();
    await reader.skip(left, `the content of ${name}`);
    left = 0;
    await reader.skip(pad512(size) - size, `the content of ${name}`);
  };
  return { stream, drain };
}

async function* iterate(source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  if (source instanceof ReadableStream) yield* chunksOf(source);
  else yield* source;
}

/**
 * The entries of a tar stream, in order. Reads ustar, pax (path, linkpath, size, mtime) and GNU long names; skips
 * global pax headers, and entries of other types (devices, FIFOs) with their content. The end is two zero blocks or
 * the end of the stream at a header. Throws TarFormatError for a bad checksum, a truncated stream, a malformed
 * extended header, or a name outside the root (absolute, `..`).
 */
export async function* readEntries(source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): AsyncGenerator<ArchiveEntry> {
  const reader = new ByteReader(iterate(source)[Symbol.asyncIterator]());
  let pending: Pending = {};
  try {
    for (;;) {
      const block = await reader.exact(BLOCK, 'a header');
      if (!block || block.every((byte) => byte === 0)) return;
      if (!checksumMatches(block)) throw new TarFormatError('a tar header has a wrong checksum');
      const typeFlag = String.fromCharCode(block[156]!);
      const headerSize = numberField(block, 124, 12, 'size');
      if (typeFlag === 'x' || typeFlag === 'g') {
        const records = paxRecords(await extendedText(reader, headerSize, 'pax header'));
        if (typeFlag === 'x') applyPax(pending, records);
        continue;
      }
      if (typeFlag === 'L' || typeFlag === 'K') {
        const text = textField(await extendedText(reader, headerSize, 'long name'), 0, headerSize);
        if (typeFlag === 'L') pending.path = text;
        else pending.linkpath = text;
        continue;
      }
      const type = TYPES[typeFlag];
      const size = type === 'file' ? (pending.size ?? headerSize) : 0;
      const skipBytes = type === 'file' ? 0 : pad512(type === undefined ? (pending.size ?? headerSize) : headerSize);
      const prefix = latin1.decode(block.subarray(257, 263)) === 'ustar\u0000' ? textField(block, 345, 155) : '';
      const rawName = pending.path ?? (prefix ? `${prefix}/${textField(block, 0, 100)}` : textField(block, 0, 100));
      const linkTarget = pending.linkpath ?? textField(block, 157, 100);
      const mtime = new Date((pending.mtime ?? numberField(block, 136, 12, 'mtime')) * 1000);
      const mode = numberField(block, 100, 8, 'mode') & 0o7777;
      pending = {};
      if (type === undefined) {
        await reader.skip(skipBytes, 'an entry of another type');
        continue;
      }
      await reader.skip(skipBytes, 'an entry');
      const name = safeName(rawName);
      if (name === '') continue; // the archive root ('./')
      const content = contentStream(reader, size, name);
      const entry: ArchiveEntry = { name, type, size, mtime, mode, stream: content.stream };
      if (type === 'symlink' || type === 'link') entry.linkTarget = linkTarget;
      yield entry;
      await content.drain();
    }
  } finally {
    await reader.close();
  }
}
