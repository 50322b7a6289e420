/** Cuts off request bodies that trickle in too slowly to ever finish (a slow-drip upload ties up a slot). */
import type { IncomingMessage } from 'node:http';

export class TooSlowError extends Error {}

/**
 * Checks every `windowMs` that at least `minBytesPerSecond` arrived on the request's connection; when not,
 * destroys the request (and its connection). Reads the socket's byte counter, so it never changes the
 * request stream's flow.
 */
export function guardBodyRate(request: IncomingMessage, minBytesPerSecond: number, windowMs: number): void {
  const socket = request.socket;
  const needed = (minBytesPerSecond * windowMs) / 1000;
  let last = socket.bytesRead;
  const timer = setInterval(() => {
    if (request.complete || request.destroyed) return clearInterval(timer);
    const now = socket.bytesRead;
    if (now - last < needed) {
      clearInterval(timer);
      request.destroy(new TooSlowError(`upload slower than ${minBytesPerSecond} bytes/s`));
    }
    last = now;
  }, windowMs);
  timer.unref();
  request.once('close', () => clearInterval(timer));
}
