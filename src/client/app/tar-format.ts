/**
 * The tar format as the application API writes and reads it (ustar blocks, octal fields, pax records): its
 * constants, its error, and the chunks of an entry's data. Shared by the packer (./entries.ts) and the reader
 * (./entries-read.ts).
 */
import { IntegrityError } from '../envelope-format.js';
import type { EntryData } from './entries.js';

/** The 512-byte block of tar (../tar-layout.ts BLOCK, repeated here: that module is Node-typed). */
export const BLOCK = 512;
export const pad512 = (n: number) => Math.ceil(n / BLOCK) * BLOCK;
/** The largest number an ustar octal field of 12 bytes holds. */
export const OCTAL_12 = 0o77777777777;
/** The largest pax extended header read (a name and a few numbers; anything larger is no archive of ours). */
export const MAX_PAX_BYTES = 1024 * 1024;
/** The longest name accepted (Linux PATH_MAX). */
export const MAX_NAME_BYTES = 4096;

/** A tar stream that is malformed, truncated, or names an entry outside the archive's root. */
export class TarFormatError extends IntegrityError {
  override readonly name = 'TarFormatError';
}

export const utf8 = new TextEncoder();

/** The bytes of an entry's data (or of a byte stream), piece by piece, whatever its form. */
export async function* chunksOf(data: EntryData): AsyncGenerator<Uint8Array> {
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
