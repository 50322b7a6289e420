/**
 * The frames of a server-sent event stream (GET /api/backups/{id}/events), each with its JSON data parsed. The parser
 * keeps an unfinished frame in memory: a frame larger than `limit` bytes fails instead. Platform-neutral.
 */
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { CofferNetworkError } from './errors.js';
import type { StatusStreamFrame } from './sdk.js';
import { tooLargeText } from './sdk-transfer.js';

/** Yields each frame of `body` until the server closes; `what` ("GET /api/…") and `origin` name it in errors. */
export async function* eventFrames(
  body: ReadableStream<Uint8Array>,
  limit: number,
  origin: string,
  what: string,
): AsyncGenerator<StatusStreamFrame> {
  let sinceFrame = 0;
  const capped = new TransformStream<Uint8Array, BufferSource>({
    transform(chunk, controller) {
      sinceFrame += chunk.byteLength;
      if (sinceFrame > limit) throw new CofferNetworkError(tooLargeText(origin, what, limit));
      controller.enqueue(chunk as Uint8Array<ArrayBuffer>);
    },
  });
  const frames = body
    .pipeThrough(capped)
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream())
    .pipeThrough(
      new TransformStream({
        transform(frame, controller) {
          sinceFrame = 0;
          controller.enqueue(frame);
        },
      }),
    );
  const reader = frames.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      let data: unknown = value.data;
      try {
        data = JSON.parse(value.data);
      } catch {
        // leave as text
      }
      yield { event: value.event ?? 'message', id: value.id, data };
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
