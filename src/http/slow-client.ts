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

/**
 * A request was refused before its body was read to the end. Closing the connection at once would make the
 * kernel reset it while the client is still sending, and the client would often lose the answer (a 413 in
 * particular). So the rest of the body is read and discarded ("lingering close"), for at most `graceMs`;
 * a client still sending after that has its connection closed. Once the body has been discarded, the
 * connection stays usable for the next request.
 */
export function discardUnreadBody(request: IncomingMessage, graceMs = 5000): void {
  if (request.complete || request.destroyed) return;
  const timer = setTimeout(() => request.socket.destroy(), graceMs);
  timer.unref();
  const done = () => clearTimeout(timer);
  request.once('end', done);
  request.once('close', done);
  request.resume();
}
