/**
 * Serving stored content (a backup's ciphertext) with a strong ETag and resumable downloads
 * (docs/api-rules.md#download): one satisfiable `bytes` range gives 206 with Content-Range, and only while
 * If-Range is absent or names the current ETag; anything else (no Range, several ranges, an unsatisfiable or
 * malformed one, a stale If-Range) gives the whole content, 200.
 *
 * With COFFER_ACCEL_REDIRECT (docs/deploy.md#downloads-served-by-nginx), for a request that came through a trusted
 * proxy (the caller passes no prefix for any other: only nginx acts on the header, a client reaching Coffer directly
 * would get an empty answer), Coffer still authorizes and decides, but answers with `X-Accel-Redirect: <prefix>/<blob
 * key>` and no body, and nginx sends the file from its `internal`
 * location. nginx applies the client's Range and If-Range there itself, against the ETag Coffer sent (the location
 * copies it, with nginx's own ETag and Last-Modified off, and at most one range): that agrees with the decision
 * above when there is no Range, when If-Range names another ETag (both send everything), and for one plainly
 * written satisfiable range. Any other Range (unsatisfiable, several, unusual syntax), where nginx might answer
 * differently, is served by Coffer itself as without the setting.
 *
 * With the S3 store the redirect names `<prefix>/<ETag without quotes>/<bucket>/<key>?<query of a GET presigned for
 * the store's own endpoint>`, and nginx's internal location proxies it to the store, passing on only the client's
 * Range (no If-Range: the store's ETag is not Coffer's) and answering with Coffer's ETag taken from the path. The
 * store applies every Range it gets, so Coffer redirects only when it would answer the same: no Range, or one plainly
 * written satisfiable range that Coffer honours (no If-Range, or one naming the current ETag).
 */
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import parseRange from 'range-parser';
import { type ByteRange, isSafeBlobKey } from '../blobs/blob-store.js';

export interface StoredContent {
  size: number;
  etag: string;
  /** The file name a browser saves it under (Content-Disposition: attachment). */
  filename: string;
  /** Opens the bytes, or only `range` of them; may throw (an AppError) before anything is sent. */
  open(range: ByteRange | undefined): Promise<Readable>;
  /** The blob's key (may throw, like open); needed only with an X-Accel-Redirect prefix (fs store). */
  locate?(): Promise<string>;
  /**
   * S3 store, instead of locate: the path (`/<bucket>/<key>`) and query of a GET of the blob presigned for the store's
   * own endpoint, which nginx's internal location proxies (may throw, like open).
   */
  locateInStore?(): Promise<string>;
}

/** A presigned path and query as the server's S3 client writes them: nothing nginx would read differently. */
const STORE_TARGET = /^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)+\?[A-Za-z0-9._~%=&-]+$/;
/** Coffer's ETags as a path segment (the quotes dropped): nginx's location puts them back. */
const ETAG_SEGMENT = /^"([A-Za-z0-9._-]+)"$/;

/** One range, written as nginx parses it the same way (numbers small enough that neither side overflows). */
const PLAIN_RANGE = /^bytes=(\d{1,15}-\d{0,15}|-\d{1,15})$/;

/** The single byte range to answer with, or undefined for the whole content. */
export function requestedRange(request: FastifyRequest, size: number, etag: string): ByteRange | undefined {
  const ifRange = request.headers['if-range'];
  const rangeHeader = request.headers.range;
  const parsed = rangeHeader && (ifRange === undefined || ifRange === etag) ? parseRange(size, rangeHeader) : -1;
  return Array.isArray(parsed) && parsed.type === 'bytes' && parsed.length === 1 ? parsed[0] : undefined;
}

/** Whether nginx, given the request's Range and If-Range and this ETag, sends what requestedRange decided. */
function nginxAgrees(request: FastifyRequest, etag: string, range: ByteRange | undefined): boolean {
  const rangeHeader = request.headers.range;
  const ifRange = request.headers['if-range'];
  if (rangeHeader === undefined) return true;
  if (ifRange !== undefined && ifRange !== etag) return true;
  return range !== undefined && PLAIN_RANGE.test(rangeHeader);
}

/** Whether the object store, given the request's Range (and no If-Range: nginx drops it), sends what requestedRange decided. */
function storeAgrees(request: FastifyRequest, range: ByteRange | undefined): boolean {
  const rangeHeader = request.headers.range;
  if (rangeHeader === undefined) return true;
  return range !== undefined && PLAIN_RANGE.test(rangeHeader);
}

/**
 * Answers with the content; with `accelPrefix` (COFFER_ACCEL_REDIRECT), by an X-Accel-Redirect to
 * `<accelPrefix>/<key>` (fs) or `<accelPrefix>/<ETag>/<bucket>/<key>?<query>` (S3) whenever nginx would send the same
 * bytes.
 */
export async function sendContent(
  request: FastifyRequest,
  reply: FastifyReply,
  content: StoredContent,
  accelPrefix: string | null = null,
): Promise<FastifyReply> {
  const { size, etag } = content;
  const range = requestedRange(request, size, etag);
  if (accelPrefix !== null && content.locateInStore && storeAgrees(request, range)) {
    const etagSegment = ETAG_SEGMENT.exec(etag)?.[1];
    const target = await content.locateInStore();
    // Made by the server's own S3 client; checked anyway (never printed: the query is a credential).
    if (etagSegment === undefined || !STORE_TARGET.test(target)) throw new Error('refusing to redirect to an unexpected store URL');
    // nginx keeps Content-Type, Content-Disposition, Cache-Control and Accept-Ranges from this answer, and the
    // store's Content-Length and Content-Range; the location sets the ETag from the path and hides the store's own.
    return reply
      .code(200)
      .header('content-type', 'application/octet-stream')
      .header('content-disposition', `attachment; filename="${content.filename}"`)
      .header('etag', etag)
      .header('cache-control', 'private, no-store')
      .header('accept-ranges', 'bytes')
      .header('x-accel-redirect', `${accelPrefix}/${etagSegment}${target}`)
      .send();
  }
  if (accelPrefix !== null && content.locate && nginxAgrees(request, etag, range)) {
    const key = await content.locate();
    // Keys are made by the server; checked anyway, so that no path outside the location can be named.
    if (!isSafeBlobKey(key)) throw new Error(`refusing to redirect to blob key ${JSON.stringify(key)}`);
    // nginx keeps Content-Type, Content-Disposition and Cache-Control from this answer, takes the ETag through
    // $upstream_http_etag, and sets Accept-Ranges, Content-Length and Content-Range itself.
    return reply
      .code(200)
      .header('content-type', 'application/octet-stream')
      .header('content-disposition', `attachment; filename="${content.filename}"`)
      .header('etag', etag)
      .header('cache-control', 'private, no-store')
      .header('x-accel-redirect', `${accelPrefix}/${key}`)
      .send();
  }
  const stream = await content.open(range);
  reply
    .header('content-type', 'application/octet-stream')
    .header('content-disposition', `attachment; filename="${content.filename}"`)
    .header('etag', etag)
    .header('cache-control', 'private, no-store')
    .header('accept-ranges', 'bytes');
  if (range) {
    reply
      .code(206)
      .header('content-range', `bytes ${range.start}-${range.end}/${size}`)
      .header('content-length', range.end - range.start + 1);
  } else {
    reply.code(200).header('content-length', size);
  }
  return reply.send(stream);
}
