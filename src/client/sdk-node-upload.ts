/**
 * The Node uploads of a backup's ciphertext: a Readable streamed as the request body on node:http(s), with
 * backpressure and the stall rule, for the direct protocol and the blob host (docs/upload-protocols.md). Apart from
 * CofferClient (src/client/sdk.ts) so that the client itself imports no Node built-in: the browser entry sends a
 * Blob with fetch instead (CofferClient.uploadBody).
 */
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { CofferNetworkError, refusalOf, type CofferApiError } from './errors.js';
import { abortError, causeText, connectionFailure, notTls } from './network-failure.js';
import { partEtag, StoreRefusalError, storeErrorCode, StoreUnreachableError, type SignedRequest } from './presigned.js';
import type { CofferClient, DirectUploadResponseBody } from './sdk.js';
import { ERROR_ANSWER_BYTES, seconds, TransferWatch } from './sdk-transfer.js';

/** Where probeUploadRefusal asks: a direct slot's upload address, or the blob host's with its client token. */
export type ProbeTarget = { protocol: 'direct'; url: string } | { protocol: 'blobhost-client'; clientToken: string; blobPath: string };

/**
 * Streams `body` as the ciphertext of a slot (direct protocol, chunked unless `contentLength` is given).
 * Memory stays bounded: the body is piped with backpressure. An early answer from the server (413, 409)
 * wins over the broken pipe it causes; a failure of `body` itself aborts the request and is rethrown.
 */
export function uploadDirect(
  client: CofferClient,
  uploadUrl: string,
  body: Readable,
  options: { contentLength?: number; signal?: AbortSignal } = {},
): Promise<DirectUploadResponseBody> {
  return streamRequest<DirectUploadResponseBody>(client, 'POST', client.url(uploadUrl), body, {
    ...options,
    headers: client.uploadSettings().headers({ 'content-type': 'application/octet-stream' }),
  });
}

/**
 * Step 2: stream the ciphertext to the blob host with the client token only (`PUT <blobApiUrl>/?pathname=…`);
 * the API key does not go there. The slot becomes UPLOADED when the blob host has stored it.
 */
export function putToBlobHost(
  client: CofferClient,
  clientToken: string,
  blobPath: string,
  body: Readable,
  options: { signal?: AbortSignal } = {},
): Promise<{ pathname: string; url?: string }> {
  const { blobApiUrl, userAgent } = client.uploadSettings();
  const url = `${blobApiUrl}/?pathname=${encodeURIComponent(blobPath)}`;
  return streamRequest(client, 'PUT', url, body, {
    signal: options.signal,
    headers: {
      authorization: `Bearer ${clientToken}`,
      'user-agent': userAgent,
      'content-type': 'application/octet-stream',
      'x-content-type': 'application/octet-stream',
      'x-api-version': '11',
    },
  });
}

/**
 * PUTs `chunks` (exactly the signed Content-Length of `request`) to the store under a presigned URL, on node:http(s)
 * with the stall rule; the API key does not go there. Resolves with the store's ETag (checked: partEtag) for a part,
 * or undefined for a whole object. A refusal is a StoreRefusalError (an expired URL is S3's 403); a connection that
 * never opened a StoreUnreachableError; no message names more of the URL than its origin.
 */
export function putToStore(
  client: CofferClient,
  request: SignedRequest,
  chunks: readonly Buffer[],
  options: { partNumber?: number; signal?: AbortSignal } = {},
): Promise<string | undefined> {
  const { userAgent } = client.uploadSettings();
  const origin = new URL(request.url).origin;
  const what = options.partNumber === undefined ? 'the upload' : `part ${options.partNumber}`;
  return streamRequest<string | undefined>(client, 'PUT', request.url, Readable.from(chunks), {
    signal: options.signal,
    headers: { 'user-agent': userAgent, ...request.headers },
    store: true,
    answer: (status, headers, text) => {
      if (status < 200 || status >= 300) throw new StoreRefusalError(origin, what, status, storeErrorCode(text));
      return options.partNumber === undefined ? undefined : partEtag(headers.etag, options.partNumber, origin);
    },
  });
}

/**
 * Asks the upload address whether it would take `contentLength` bytes, without sending any: the server checks
 * Content-Length before reading (docs/api-rules.md#upload), so an over-limit or over-quota length is answered 413
 * at once. Used after an upload broke off with no answer: a server that cut a body off with 413 and closed the
 * connection while the client was still sending can make the TCP reset swallow that answer. Resolves with the
 * refusal (UploadTooLargeError for the size limit, else the CofferApiError of the 413: `upload_exceeds_quota`), or
 * undefined when the answer is anything else (the probe is then abandoned; it stores nothing).
 */
export function probeUploadRefusal(
  client: CofferClient,
  slot: ProbeTarget,
  contentLength: number,
  timeoutMs = 3000,
): Promise<CofferApiError | undefined> {
  const settings = client.uploadSettings();
  const url = new URL(
    slot.protocol === 'direct' ? client.url(slot.url) : `${settings.blobApiUrl}/?pathname=${encodeURIComponent(slot.blobPath)}`,
  );
  const headers =
    slot.protocol === 'direct'
      ? settings.headers({ 'content-type': 'application/octet-stream' })
      : { authorization: `Bearer ${slot.clientToken}`, 'x-content-type': 'application/octet-stream' };
  headers['content-length'] = String(contentLength);
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((resolve) => {
    const request = transport.request(url, { method: slot.protocol === 'direct' ? 'POST' : 'PUT', headers });
    const done = (value: CofferApiError | undefined) => {
      clearTimeout(timer);
      request.destroy();
      resolve(value);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    request.on('error', () => done(undefined));
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      readCapped(response, ERROR_ANSWER_BYTES).then(
        (text) => done(status === 413 ? refusalOf(status, text, response.headers) : undefined),
        () => done(undefined),
      );
    });
    request.flushHeaders();
  });
}

/**
 * Streams `body` as a request body under the stall rule (stallWindowMs: each wait for the connection to take more
 * is watched), then waits for the answer under the request deadline. The answer wins over a broken pipe: a server
 * that refuses mid-stream (413) answers and closes while this side is still sending.
 */
function streamRequest<T>(
  client: CofferClient,
  method: 'POST' | 'PUT',
  address: string,
  body: Readable,
  options: {
    contentLength?: number;
    signal?: AbortSignal;
    headers: Record<string, string>;
    /** The store, not Coffer: a connection that never opened is a StoreUnreachableError. */
    store?: boolean;
    /** What the answer means (default: a JSON body, or the refusal it is); a throw is the request's failure. */
    answer?: (status: number, headers: http.IncomingHttpHeaders, text: string) => T;
  },
): Promise<T> {
  const url = new URL(address);
  const transport = url.protocol === 'https:' ? https : http;
  const { stallWindowMs, requestTimeoutMs, maxAnswerBytes } = client.uploadSettings();
  const watch = new TransferWatch(stallWindowMs, `the upload to ${url.origin}`);
  const answerWithin = requestTimeoutMs;
  return new Promise((resolve, reject) => {
    let settled = false;
    let answered = false;
    let answerTimer: NodeJS.Timeout | undefined;
    const settle = (error: Error | undefined, value?: T) => {
      if (settled) return;
      settled = true;
      clearTimeout(answerTimer);
      options.signal?.removeEventListener('abort', onAbort);
      if (error) {
        if (!body.destroyed) body.destroy();
        if (!request.destroyed) request.destroy();
        reject(error);
      } else resolve(value!);
    };
    const onAbort = () => settle(abortError(options.signal));
    const headers = { ...options.headers };
    if (options.contentLength !== undefined) headers['content-length'] = String(options.contentLength);
    const request = transport.request(url, { method, headers });
    let connected = false;
    request.on('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else socket.once('connect', () => (connected = true));
    });
    // From the body's end (or an early answer) the answer is read under the request deadline.
    const answerDeadline = () => {
      answerTimer ??= setTimeout(() => {
        const what = answered ? 'finish its answer to' : 'answer';
        settle(
          new CofferNetworkError(
            `the server at ${url.origin} did not ${what} the upload within ${seconds(answerWithin)} (COFFER_REQUEST_TIMEOUT)`,
          ),
        );
      }, answerWithin);
    };
    request.on('response', (response) => {
      answered = true;
      answerDeadline();
      const status = response.statusCode ?? 0;
      const ok = status >= 200 && status < 300;
      readCapped(response, ok ? maxAnswerBytes : ERROR_ANSWER_BYTES, !ok).then(
        (text) => {
          if (options.answer) {
            try {
              return settle(undefined, options.answer(status, response.headers, text));
            } catch (error) {
              return settle(error instanceof Error ? error : new Error(String(error)));
            }
          }
          if (!ok) return settle(refusalOf(status, text, response.headers));
          try {
            settle(undefined, JSON.parse(text) as T);
          } catch {
            settle(new CofferNetworkError('the upload answer is not JSON'));
          }
        },
        (error: unknown) =>
          settle(error instanceof CofferNetworkError ? error : new CofferNetworkError(`upload answer broke off: ${causeText(error)}`)),
      );
    });
    request.on('error', (error) => {
      // The server may have answered (e.g. 413) and closed while we were still sending: let the answer win.
      setTimeout(() => {
        if (!answered) {
          if (options.store && !connected) {
            settle(new StoreUnreachableError(`cannot reach the store at ${url.origin}: ${causeText(error)}`, { cause: error }));
            return;
          }
          const reason = notTls(error) ? connectionFailure(address, error) : `upload to ${url.origin} failed: ${causeText(error)}`;
          settle(new CofferNetworkError(reason, { cause: error }));
        }
      }, 250);
    });
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    // What the connection has not taken yet drains when it takes it: that wait is the network's.
    const drained = (written: number) =>
      new Promise<number>((resolve) => {
        // All that waits to be sent goes out by 'drain': at least the chunk just written.
        const pending = Math.max(request.writableLength, written);
        const done = () => {
          request.off('drain', done);
          request.off('close', done);
          resolve(pending);
        };
        request.on('drain', done);
        request.on('close', done);
      });
    void (async () => {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        if (settled || request.destroyed) return;
        if (!request.write(chunk)) await watch.wait(drained(chunk.length));
      }
      if (settled || request.destroyed) return;
      request.end();
      answerDeadline();
    })().catch((error: unknown) => settle(error instanceof Error ? error : new Error(String(error))));
  });
}

/** The answer of a node:http request as text, at most `limit` bytes: over it, cut there (`cut`) or fail. */
async function readCapped(response: http.IncomingMessage, limit: number, cut = false): Promise<string> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) {
      response.destroy();
      if (cut) {
        parts.push(chunk.subarray(0, chunk.length - (total - limit)));
        break;
      }
      throw new CofferNetworkError(`the upload answer is larger than ${limit} bytes: stopped reading`);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString('utf8');
}
