/** The byte limit on upload bodies that both the API's single-request upload and the blob host enforce. */
import { type Readable, Transform, type TransformCallback } from 'node:stream';

/** What `limited` fails with when more than its limit arrives. */
export class TooLarge extends Error {}

/**
 * `source` passed through a byte counter that fails with TooLarge as soon as more than `limit` bytes arrive. The
 * source is not destroyed on overflow (so a 413 can still be answered), but its own failure or early close fails
 * the result.
 */
export function limited(source: Readable, limit: number): Readable {
  let seen = 0;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      seen += chunk.length;
      if (seen > limit) callback(new TooLarge());
      else callback(null, chunk);
    },
  });
  source.once('error', (error) => out.destroy(error));
  source.once('close', () => {
    if (!source.readableEnded) out.destroy(new Error('the client closed the upload before its end'));
  });
  return source.pipe(out);
}
