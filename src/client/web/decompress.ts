/**
 * The checked decompressors of a browser (or any web-streams runtime): the readers' rules of ../compression-core.ts
 * (as in the CLI) on DecompressionStream for gzip and fzstd for zstd (browsers' DecompressionStream has no zstd).
 * One copy for the console's restore worker and the SDK's browser entry.
 */
import { Decompress } from 'fzstd';
import { checkGzipTrailer, crc32, GzipFramer, OutputLimit, ZstdFramer } from '../compression-core.js';

/**
 * zstd in pure JavaScript (fzstd): browsers' DecompressionStream has no zstd. One frame, nothing after it, at most the
 * sealed size (src/client/compression-core.ts, as in the CLI); the frame is fed one block at a time, and only when the
 * reader asks for more (a pull source), so a few hostile bytes never become gigabytes at once.
 */
export function zstdStream(input: ReadableStream<Uint8Array>, sealedSize: number): ReadableStream<Uint8Array> {
  const framer = new ZstdFramer(sealedSize);
  const limit = new OutputLimit(sealedSize);
  const reader = input.getReader();
  let pieces: Uint8Array[] = [];
  let out: Uint8Array[] = [];
  const decoder = new Decompress((chunk) => {
    limit.add(chunk.length);
    framer.output(chunk);
    out.push(chunk);
  });
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      while (out.length === 0) {
        const piece = pieces.shift();
        if (piece) {
          decoder.push(piece);
          continue;
        }
        const { done, value } = await reader.read();
        if (done) {
          framer.end();
          decoder.push(new Uint8Array(0), true);
          framer.verify(); // fzstd skips the frame's checksum; node:zlib checks it
          for (const chunk of out) controller.enqueue(chunk);
          controller.close();
          return;
        }
        pieces = framer.push(value);
      }
      for (const chunk of out) controller.enqueue(chunk);
      out = [];
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

/**
 * One gzip member and nothing after it, at most the sealed size (src/client/compression-core.ts, as in the CLI): the
 * header checked and dropped, the deflate body inflated raw (DecompressionStream refuses input after its end: with
 * the 8-byte trailer held back, that is any byte the member does not hold), the trailer's CRC-32 and size checked.
 */
export function gzipStream(input: ReadableStream<Uint8Array>, sealedSize: number): ReadableStream<Uint8Array> {
  const framer = new GzipFramer();
  const limit = new OutputLimit(sealedSize);
  let trailer: Uint8Array | undefined;
  let framed: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (framed = resolve));
  let crc = 0;
  return input
    .pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          for (const piece of framer.push(chunk)) controller.enqueue(piece);
        },
        flush() {
          trailer = framer.end();
          framed();
        },
      }),
    )
    .pipeThrough(new DecompressionStream('deflate-raw') as unknown as ReadableWritablePair<Uint8Array, Uint8Array>)
    .pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          limit.add(chunk.length);
          crc = crc32(chunk, crc);
          controller.enqueue(chunk);
        },
        async flush() {
          await done;
          checkGzipTrailer(trailer!, crc, limit.bytes);
        },
      }),
    );
}
