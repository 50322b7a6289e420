/**
 * A raw HTTP/1.1 client over node:net, for requests fetch and node:http refuse to send: bytes that are not
 * UTF-8 in the path, header values or body, duplicate header lines, hand-made framing. Every request asks
 * for `Connection: close`, so a response ends with the connection (or with its length, whichever comes first).
 */
import net from 'node:net';

export type HeaderLine = [name: string, value: string | Buffer];

export interface WireRequest {
  method: string;
  /** The request target exactly as sent (a latin1 string: each char is one byte). */
  target: string;
  headers: HeaderLine[];
  body?: Buffer;
  /** Send the body with `Transfer-Encoding: chunked` in pieces of this size instead of a Content-Length. */
  chunkSize?: number;
}

export interface WireResponse {
  status: number;
  headers: Headers;
  /** Header lines as received, duplicates kept. */
  headerLines: [string, string][];
  body: unknown;
  raw: Buffer;
  text: string;
  /** For an event stream: the frames read before the client hung up. */
  frames?: { event: string; data: string }[];
}

export class NoResponse extends Error {}

/** Nothing at all came back within the time allowed (the server may be waiting for bytes never sent). */
export class Silence extends Error {}

/** Serializes a request: request line, header lines, then the body (framed by Content-Length unless chunked). */
export function serialize(request: WireRequest): Buffer {
  const parts: Buffer[] = [Buffer.from(`${request.method} ${request.target} HTTP/1.1\r\n`, 'latin1')];
  const has = (name: string) => request.headers.some(([n]) => n.toLowerCase() === name);
  const lines: HeaderLine[] = [...request.headers];
  if (!has('host')) lines.unshift(['Host', '127.0.0.1']);
  if (!has('connection')) lines.push(['Connection', 'close']);
  const body = request.body;
  if (body !== undefined && request.chunkSize !== undefined) {
    if (!has('transfer-encoding')) lines.push(['Transfer-Encoding', 'chunked']);
  } else if (body !== undefined && !has('content-length')) {
    lines.push(['Content-Length', String(body.length)]);
  }
  for (const [name, value] of lines) {
    parts.push(Buffer.from(`${name}: `, 'latin1'), typeof value === 'string' ? Buffer.from(value, 'latin1') : value, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('\r\n'));
  if (body !== undefined && request.chunkSize !== undefined) {
    for (let at = 0; at < body.length; at += request.chunkSize) {
      const chunk = body.subarray(at, at + request.chunkSize);
      parts.push(Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n'));
    }
    parts.push(Buffer.from('0\r\n\r\n'));
  } else if (body !== undefined) {
    parts.push(body);
  }
  return Buffer.concat(parts);
}

function decodeChunked(data: Buffer): Buffer | null {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) return null;
    const size = parseInt(data.subarray(at, lineEnd).toString('latin1').split(';')[0]!, 16);
    if (Number.isNaN(size)) throw new Error('malformed chunked response');
    if (size === 0) return Buffer.concat(out);
    if (data.length < lineEnd + 2 + size + 2) return null;
    out.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

function parseFrames(text: string): { event: string; data: string }[] {
  return text
    .split('\n\n')
    .slice(0, -1)
    .map((block) => {
      const fields = block.split('\n');
      const value = (name: string) => fields.filter((f) => f.startsWith(`${name}:`)).map((f) => f.slice(name.length + 1).trim());
      return { event: value('event')[0] ?? 'message', data: value('data').join('\n') };
    })
    .filter((frame) => frame.data !== '');
}

/**
 * Sends bytes on a fresh connection and reads one response. An event stream is read until its first data
 * frame, then the client hangs up. Rejects with NoResponse when the server closes without answering, and
 * fails after `timeoutMs` without a complete response (a liveness guard, not a timing assertion).
 */
export function exchange(port: number, bytes: Buffer, timeoutMs = 20_000): Promise<WireResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let data = Buffer.alloc(0);
    let settled = false;
    const finish = (error: Error | null, response?: WireResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(response!);
    };
    const timer = setTimeout(() => {
      const message = `no complete response within ${timeoutMs} ms (got ${data.length} bytes)`;
      finish(data.length === 0 ? new Silence(message) : new Error(message));
    }, timeoutMs);
    const tryParse = (ended: boolean) => {
      const headEnd = data.indexOf('\r\n\r\n');
      if (headEnd < 0) {
        if (ended) finish(new NoResponse(`connection closed after ${data.length} bytes without a response head`));
        return;
      }
      const [statusLine, ...lines] = data.subarray(0, headEnd).toString('latin1').split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine!)?.[1]);
      if (!status) return finish(new Error(`malformed status line: ${statusLine}`));
      if (status >= 100 && status < 200) {
        // An interim response (100 Continue): the real one follows.
        data = data.subarray(headEnd + 4);
        return tryParse(ended);
      }
      const headerLines = lines.map((line) => {
        const colon = line.indexOf(':');
        return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()] as [string, string];
      });
      const headers = new Headers();
      for (const [name, value] of headerLines) headers.append(name, value);
      const rest = data.subarray(headEnd + 4);
      let body: Buffer | null;
      const contentType = headers.get('content-type') ?? '';
      if (contentType.startsWith('text/event-stream')) {
        const text = (headers.get('transfer-encoding') === 'chunked' ? decodeChunkedPartial(rest) : rest).toString('utf8');
        const frames = parseFrames(text);
        if (frames.length === 0 && !ended) return;
        return finish(null, { status, headers, headerLines, body: text, raw: Buffer.from(text), text, frames });
      }
      if (headers.get('transfer-encoding') === 'chunked') body = decodeChunked(rest);
      else if (headers.has('content-length')) {
        const length = Number(headers.get('content-length'));
        body = rest.length >= length ? rest.subarray(0, length) : null;
      } else body = ended ? rest : null;
      if (body === null) {
        if (ended) finish(new Error(`connection closed in the middle of the response body (${rest.length} bytes)`));
        return;
      }
      const text = body.toString('utf8');
      let parsed: unknown = text;
      if (contentType.includes('application/json')) {
        try {
          parsed = JSON.parse(text);
        } catch {
          return finish(new Error(`response declares JSON but is not: ${text.slice(0, 200)}`));
        }
      }
      finish(null, { status, headers, headerLines, body: parsed, raw: body, text });
    };
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      tryParse(false);
    });
    socket.on('end', () => tryParse(true));
    socket.on('close', () => tryParse(true));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // The server may answer and close before it has read the whole request (e.g. 413): a reset after
      // the response is complete is fine; a reset before any response is "no response".
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') tryParse(true);
      else finish(error);
    });
    socket.write(bytes);
  });
}

/** The complete chunks of a chunked body received so far (event streams never finish). */
function decodeChunkedPartial(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) break;
    const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size) || size === 0 || data.length < lineEnd + 2 + size) break;
    out.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(out);
}

export function send(port: number, request: WireRequest, timeoutMs?: number): Promise<WireResponse> {
  return exchange(port, serialize(request), timeoutMs);
}
