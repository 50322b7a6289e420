/**
 * A backup's ciphertext read straight from the store under a presigned URL (the `s3-presigned-download` extension,
 * docs/upload-protocols.md): one GET of the URL on fetch, resumed with Range, its body under the stall rule.
 * Platform-neutral (no Node built-in). The URL is a bearer credential: no error names more of it than its origin,
 * and the API key never goes there.
 */
import { CofferNetworkError } from './errors.js';
import type { ContentResponse } from './sdk.js';
import { IntegrityError } from './envelope-format.js';
import { causeText } from './network-failure.js';
import { StoreRefusalError, storeErrorCode, StoreUnreachableError, type ContentUrl } from './presigned.js';
import { readAnswer, seconds, TransferWatch, watchedDownload, ERROR_ANSWER_BYTES } from './sdk-transfer.js';

/** What the store answered a GET of a content URL (the shape of CofferClient.openContent's answer), or `expired`. */
export type StoreContent = ContentResponse | { status: 'expired' };

export interface StoreGet {
  from?: number;
  etag?: string;
  signal?: AbortSignal;
  userAgent: string;
  requestTimeoutMs: number;
  stallWindowMs: number;
}

/**
 * GETs the ciphertext at `link` (from byte `from`, with If-Range `etag`): the answer's headers under the request
 * deadline, then its body under the stall rule. A 403 is `expired` (S3's answer to an expired signature: the caller
 * asks for a new URL); any other refusal is a CofferNetworkError naming the store's status and code; a connection
 * that fails before any answer is a StoreUnreachableError. A whole body whose length is not `link.size` is an
 * IntegrityError (the server named another size than the store holds).
 */
export async function openStoreContent(fetchImpl: typeof fetch, link: ContentUrl, options: StoreGet): Promise<StoreContent> {
  const origin = new URL(link.url).origin;
  const headers: Record<string, string> = { 'user-agent': options.userAgent };
  if (options.from && options.from > 0) {
    headers.range = `bytes=${options.from}-`;
    if (options.etag) headers['if-range'] = options.etag;
  }
  const deadline = new AbortController();
  const timer = setTimeout(
    () =>
      deadline.abort(
        new CofferNetworkError(
          `the store at ${origin} did not answer within ${seconds(options.requestTimeoutMs)} (COFFER_REQUEST_TIMEOUT)`,
        ),
      ),
    options.requestTimeoutMs,
  );
  const signal = options.signal ? AbortSignal.any([options.signal, deadline.signal]) : deadline.signal;
  let response: Response;
  try {
    response = await fetchImpl(link.url, { method: 'GET', headers, signal, redirect: 'error' });
  } catch (error) {
    clearTimeout(timer);
    if (options.signal?.aborted) throw error;
    if (deadline.signal.aborted) throw deadline.signal.reason;
    throw new StoreUnreachableError(`cannot reach the store at ${origin}: ${causeText(error)}`, { cause: error });
  }
  try {
    if (response.status === 403) {
      await response.body?.cancel().catch(() => undefined);
      return { status: 'expired' };
    }
    if (response.status !== 200 && response.status !== 206) {
      const text = await readAnswer(response, ERROR_ANSWER_BYTES, 'GET', origin).catch(() => '');
      throw new StoreRefusalError(origin, 'the download', response.status, storeErrorCode(text));
    }
    if (!response.body) throw new CofferNetworkError(`the store at ${origin} answered the download without a body`);
    const etag = response.headers.get('etag') ?? undefined;
    const body = watchedDownload(response.body, new TransferWatch(options.stallWindowMs, `the download from ${origin}`));
    if (response.status === 206) {
      const match = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(response.headers.get('content-range') ?? '');
      if (!match || Number(match[3]) !== link.size) {
        await body.cancel();
        throw new CofferNetworkError(`the store at ${origin} answered a range without a usable Content-Range`);
      }
      return { status: 206, headers: response.headers, start: Number(match[1]), totalBytes: link.size, etag, body };
    }
    const length = Number(response.headers.get('content-length') ?? NaN);
    if (Number.isSafeInteger(length) && length !== link.size) {
      await body.cancel();
      throw new IntegrityError(`the store holds ${length} bytes of this backup; the server says ${link.size}`);
    }
    return { status: 200, headers: response.headers, start: 0, totalBytes: link.size, etag, body };
  } finally {
    clearTimeout(timer);
  }
}
