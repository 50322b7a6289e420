/**
 * Reading a backup's tar stream back into entries (readEntries): the strict reader of the application API, which
 * refuses a malformed, truncated or escaping archive with a TarFormatError. The packer is ./entries.ts.
 */
import type { ArchiveEntry } from './entries.js';
import { BLOCK, chunksOf, MAX_PAX_BYTES, pad512, TarFormatError } from './tar-format.js';

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
