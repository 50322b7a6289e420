/**
 * Reading an answer and watching a transfer: an answer's text read under a byte limit, and the stall rule of an
 * upload or a download (TransferWatch). Platform-neutral (no Node built-in).
 */
import { CofferNetworkError } from './errors.js';

/** The slowest transfer that still counts as moving: 1 KiB/s, averaged over a stall window of waiting. */
export const MIN_TRANSFER_RATE = 1024;
/** Of a refusal only its JSON (or the first 200 characters) matter: read no more than this of one. */
export const ERROR_ANSWER_BYTES = 64 * 1024;

/** The time a body of known length may take to send at MIN_TRANSFER_RATE, on top of the request deadline. */
export function sendingAllowanceMs(body: string | ReadableStream<Uint8Array> | Blob | Uint8Array | undefined): number {
  const size = body instanceof Blob ? body.size : body instanceof Uint8Array ? body.byteLength : 0;
  return (size / MIN_TRANSFER_RATE) * 1000;
}

/** @internal A duration in words ("2 s", "1.5 s"). */
export const seconds = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`);

export const tooLargeText = (origin: string, what: string, limit: number) =>
  `the server at ${origin} sent more than ${Math.round(limit / 1048576) || limit} ${limit >= 1048576 ? 'MiB' : 'bytes'} ` +
  `in answer to ${what}: stopped reading (no Coffer answer is that large; check that COFFER_URL points at a Coffer server)`;

/**
 * The answer's text, read as a stream and stopped at `limit` bytes: over it, a JSON answer fails (CofferNetworkError)
 * without ever holding more than the limit; a refusal's (ERROR_ANSWER_BYTES) is cut there instead (only its start
 * matters).
 */
export async function readAnswer(response: Response, limit: number, what: string, server: string): Promise<string> {
  if (!response.body) return '';
  const declared = Number(response.headers.get('content-length'));
  const cut = !response.ok;
  if (!cut && Number.isFinite(declared) && declared > limit) {
    await response.body.cancel().catch(() => undefined);
    throw new CofferNetworkError(tooLargeText(new URL(server).origin, what, limit));
  }
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > limit) {
        if (cut) {
          parts.push(value.subarray(0, value.byteLength - (total - limit)));
          break;
        }
        throw new CofferNetworkError(tooLargeText(new URL(server).origin, what, limit));
      }
      parts.push(value);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return decodeParts(parts);
}

/** The UTF-8 text of the pieces of an answer. */
function decodeParts(parts: Uint8Array[]): string {
  const decoder = new TextDecoder();
  return parts.map((part) => decoder.decode(part, { stream: true })).join('') + decoder.decode();
}

/**
 * The stall rule of an upload or a download: the time spent waiting on the network is counted in windows of
 * `windowMs`, and a window in which fewer than MIN_TRANSFER_RATE bytes per second moved fails the transfer. Only
 * waiting counts: a transfer held back by this side (a slow disk, the compressor) is not stalled.
 */
export class TransferWatch {
  private waitedMs = 0;
  private moved = 0;

  constructor(
    readonly windowMs: number,
    /** What is moving, for the error: "the download from https://…". */
    private readonly what: string,
  ) {}

  private get floor(): number {
    return (MIN_TRANSFER_RATE * this.windowMs) / 1000;
  }

  stalled(): CofferNetworkError {
    return new CofferNetworkError(
      `${this.what} stalled: less than ${MIN_TRANSFER_RATE} bytes/s over ${seconds(this.windowMs)} (COFFER_STALL_WINDOW)`,
    );
  }

  /**
   * Waits on the network for `pending`, which resolves with the number of bytes that moved meanwhile. Rejects with
   * stalled() when the window's waiting ends below the floor (also while `pending` has not settled).
   */
  async wait(pending: Promise<number>): Promise<number> {
    for (;;) {
      const started = Date.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const windowEnd = new Promise<'window'>((resolve) => (timer = setTimeout(() => resolve('window'), this.windowMs - this.waitedMs)));
      const outcome = await Promise.race([pending.then((bytes) => ({ bytes })), windowEnd]).finally(() => clearTimeout(timer));
      this.waitedMs += Date.now() - started;
      if (outcome === 'window') {
        // A whole window of waiting ran out during this one wait: what moved before it must reach the floor.
        if (this.moved < this.floor) throw this.stalled();
        this.waitedMs = 0;
        this.moved = 0;
        continue;
      }
      this.moved += outcome.bytes;
      if (this.waitedMs >= this.windowMs) {
        if (this.moved < this.floor) throw this.stalled();
        this.waitedMs = 0;
        this.moved = 0;
      }
      return outcome.bytes;
    }
  }
}

/** A download body read under the stall rule (each read that waits on the network is watched). */
export function watchedDownload(source: ReadableStream<Uint8Array>, watch: TransferWatch): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let chunk: ReadableStreamReadResult<Uint8Array> | undefined;
        try {
          await watch.wait(
            reader.read().then((read) => {
              chunk = read;
              return read.value?.byteLength ?? 0;
            }),
          );
        } catch (error) {
          await reader.cancel(error).catch(() => undefined);
          throw error;
        }
        if (chunk!.done) controller.close();
        else controller.enqueue(chunk!.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}
