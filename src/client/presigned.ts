/**
 * The client's side of presigned S3 transfers (docs/upload-protocols.md, s3-presigned): the extensions a server
 * announces (`Coffer-Extensions`), and the negotiation answers read as the hostile input they may be. Platform-neutral
 * (no Node built-in): the browser entry imports it through ./sdk.ts. A signed URL is a bearer credential for one
 * object: it never goes into an error message (only its origin does).
 */
import { CofferNetworkError } from './errors.js';

/** The extension a create answer (`POST /api/backups` 201) announces when the client may upload to the store itself. */
export const PRESIGNED_UPLOAD = 's3-presigned-upload';
/** The extension a backup's record (`GET /api/backups/{id}`) announces when the client may download from the store. */
export const PRESIGNED_DOWNLOAD = 's3-presigned-download';

/** The largest URL, header value and ETag taken from an answer: far above any real one. */
const MAX_URL_CHARS = 16 * 1024;
const MAX_HEADER_CHARS = 8 * 1024;
const MAX_ETAG_CHARS = 256;
/** A part may not be larger than S3 allows (5 GiB), nor may an upload have more parts. */
export const MAX_PART_BYTES = 5 * 1024 ** 3;
export const MAX_PARTS = 10_000;
/** S3's smallest part but the last. */
export const MIN_PART_BYTES = 5 * 1024 * 1024;

/** The extensions named by a `Coffer-Extensions` header (comma-separated tokens; empty without one). */
export function extensionsOf(headers: Headers): ReadonlySet<string> {
  const value = headers.get('coffer-extensions');
  if (value === null || value.length > 1024) return new Set();
  return new Set(
    value
      .split(',')
      .map((token) => token.trim().toLowerCase())
      .filter((token) => /^[a-z0-9.-]{1,64}$/.test(token)),
  );
}

/** One request the client sends to the store as given: its method, URL and the headers the signature covers. */
export interface SignedRequest {
  method: 'PUT' | 'GET';
  /** The store's URL with its signature in the query: a bearer credential until it expires (never logged). */
  url: string;
  /** The headers the signature covers, sent exactly so (an upload's Content-Length). */
  headers: Record<string, string>;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

/** The answer of `s3-presigned.start`: one PUT of the whole (with a size), or a multipart upload. */
export type PresignedStart =
  | { mode: 'single'; uploadKey: string; request: SignedRequest }
  | { mode: 'multipart'; uploadKey: string; uploadId: string; minPartBytes: number; maxParts: number };

/** What `s3-presigned.complete` answers: the slot is UPLOADED with `size` bytes at `pathname`. */
export interface PresignedComplete {
  /** The slot's blob path. */
  pathname: string;
  /** The ciphertext's size as stored. */
  size: number;
}

/** What `GET /api/backups/{id}/content-url` answers. */
export interface ContentUrl {
  /** A presigned GET of the ciphertext in the store (a bearer credential until it expires: never logged). */
  url: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
  /** The backup's ciphertextSizeBytes. */
  size: number;
}

/** The store could not be reached at all (no answer came): a transfer with no byte moved yet may take the server's way. */
export class StoreUnreachableError extends CofferNetworkError {}

/** The store refused a presigned request: its HTTP status and S3 error code (never the URL). */
export class StoreRefusalError extends CofferNetworkError {
  constructor(
    origin: string,
    what: string,
    readonly status: number,
    /** S3's error code (`AccessDenied`, `SignatureDoesNotMatch`, …), or ''. */
    readonly storeCode: string,
  ) {
    super(`the store at ${origin} refused ${what} with HTTP ${status}${storeCode ? ` (${storeCode})` : ''}`);
  }
}

/** The store took a request but answered it in a way S3 does not (no ETag, an absurd one): never retried. */
export class StoreAnswerError extends CofferNetworkError {}

/** The code of an S3 error answer (`<Code>AccessDenied</Code>`), or ''. */
export function storeErrorCode(text: string): string {
  return /<Code>([A-Za-z0-9.]{1,64})<\/Code>/.exec(text)?.[1] ?? '';
}

/** An answer of the negotiation that this client cannot use (a broken or hostile server): never retried as is. */
export class PresignedAnswerError extends CofferNetworkError {}

const unusable = (what: string, why: string) =>
  new PresignedAnswerError(`the server's ${what} answer is unusable (${why}): a Coffer server does not answer so`);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const isCount = (value: unknown, max: number): value is number =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value <= max;

/** A printable string of at most `max` characters, without whitespace at its ends or control characters. */
const isToken = (value: unknown, max: number): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= max && /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(value);

/** An absolute http(s) URL with no credentials in it. */
function storeUrl(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length > MAX_URL_CHARS) throw unusable(what, 'no URL');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw unusable(what, 'the URL does not parse');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw unusable(what, `a ${url.protocol} URL`);
  if (url.username !== '' || url.password !== '') throw unusable(what, 'a URL with credentials');
  return url.toString();
}

/** An ISO date of the future or the recent past (a slow answer's). */
function expiry(value: unknown, what: string): number {
  const at = typeof value === 'string' && value.length <= 64 ? Date.parse(value) : NaN;
  if (!Number.isFinite(at)) throw unusable(what, 'no expiresAt date');
  return at;
}

/** The headers a request must carry: names that are tokens, values without line breaks, none that the client owns. */
const OWNED = new Set(['host', 'connection', 'transfer-encoding', 'content-type', 'keep-alive', 'upgrade', 'expect', 'te', 'trailer']);

function signedHeaders(value: unknown, what: string): Record<string, string> {
  if (!isObject(value)) throw unusable(what, 'no headers');
  const entries = Object.entries(value);
  if (entries.length > 16) throw unusable(what, 'too many headers');
  const headers: Record<string, string> = {};
  for (const [name, text] of entries) {
    const lower = name.toLowerCase();
    if (!/^[a-z0-9-]{1,64}$/.test(lower) || OWNED.has(lower) || lower === 'authorization' || lower.startsWith('proxy-')) {
      throw unusable(what, `a header the client does not send (${name.slice(0, 64)})`);
    }
    if (typeof text !== 'string' || text.length > MAX_HEADER_CHARS || /[\0\r\n]/.test(text)) throw unusable(what, `a bad ${lower} header`);
    headers[lower] = text;
  }
  return headers;
}

/** A signed request of `method`; an upload's must sign exactly `size` bytes. */
function signedRequest(value: unknown, what: string, method: 'PUT' | 'GET', size?: number): SignedRequest {
  if (!isObject(value)) throw unusable(what, 'no request');
  if (value.method !== method) throw unusable(what, `not a ${method}`);
  const headers = signedHeaders(value.headers, what);
  if (size !== undefined && headers['content-length'] !== String(size)) {
    throw unusable(what, `it signs another length than the ${size} bytes asked for`);
  }
  return { method, url: storeUrl(value.url, what), headers, expiresAt: expiry(value.expiresAt, what) };
}

/** The upload key the server names: `backups/…`, printable, no `..`. */
function uploadKey(value: unknown, what: string): string {
  if (!isToken(value, 1024) || !value.startsWith('backups/') || value.split('/').includes('..'))
    throw unusable(what, 'no usable uploadKey');
  return value;
}

/** The answer of `s3-presigned.start` (asked with `size`, or without it for a multipart upload). */
export function parseStart(body: unknown, size: number | undefined): PresignedStart {
  const what = 's3-presigned.start';
  if (!isObject(body) || body.type !== what) throw unusable(what, 'not a start answer');
  const key = uploadKey(body.uploadKey, what);
  if (size !== undefined) {
    if (body.mode !== 'single') throw unusable(what, 'not a single PUT for a known size');
    return { mode: 'single', uploadKey: key, request: signedRequest(body.request, what, 'PUT', size) };
  }
  if (body.mode !== 'multipart') throw unusable(what, 'not a multipart upload');
  if (!isToken(body.uploadId, 1024)) throw unusable(what, 'no usable uploadId');
  const minPartBytes = body.minPartBytes ?? MIN_PART_BYTES;
  const maxParts = body.maxParts ?? MAX_PARTS;
  if (!isCount(minPartBytes, MAX_PART_BYTES)) throw unusable(what, 'a bad minPartBytes');
  if (!isCount(maxParts, MAX_PARTS) || maxParts < 1) throw unusable(what, 'a bad maxParts');
  return { mode: 'multipart', uploadKey: key, uploadId: body.uploadId, minPartBytes, maxParts };
}

/** The answer of `s3-presigned.part` for part `partNumber` of `size` bytes. */
export function parsePart(body: unknown, partNumber: number, size: number): SignedRequest {
  const what = 's3-presigned.part';
  if (!isObject(body) || body.type !== what) throw unusable(what, 'not a part answer');
  if (body.partNumber !== partNumber) throw unusable(what, `it signs another part than ${partNumber}`);
  return signedRequest(body.request, what, 'PUT', size);
}

/** The answer of `s3-presigned.complete`, which must name the size sent. */
export function parseComplete(body: unknown, size: number): PresignedComplete {
  const what = 's3-presigned.complete';
  if (!isObject(body) || body.type !== what) throw unusable(what, 'not a complete answer');
  if (!isToken(body.pathname, 1024)) throw unusable(what, 'no pathname');
  if (body.size !== size)
    throw unusable(what, `it names ${isCount(body.size, Number.MAX_SAFE_INTEGER) ? body.size : 'no'} bytes, ${size} were sent`);
  return { pathname: body.pathname, size };
}

/** The answer of `GET /api/backups/{id}/content-url`. */
export function parseContentUrl(body: unknown): ContentUrl {
  const what = 'content-url';
  if (!isObject(body)) throw unusable(what, 'not an object');
  if (!isCount(body.size, Number.MAX_SAFE_INTEGER)) throw unusable(what, 'no size');
  return { url: storeUrl(body.url, what), expiresAt: expiry(body.expiresAt, what), size: body.size };
}

/**
 * The ETag the store answered a part's PUT with, as CompleteMultipartUpload needs it back: printable, at most
 * MAX_ETAG_CHARS, with its quotes. Missing or anything else: an error naming the part (the store is no S3).
 */
export function partEtag(value: string | string[] | null | undefined, partNumber: number, origin: string): string {
  const text = Array.isArray(value) ? undefined : value?.trim();
  if (text === undefined || text === '') {
    throw new StoreAnswerError(`the store at ${origin} took part ${partNumber} but answered no ETag: it does not behave as S3 does`);
  }
  if (!isToken(text, MAX_ETAG_CHARS) || /[\s,]/.test(text.replace(/^"|"$/g, ''))) {
    throw new StoreAnswerError(`the store at ${origin} answered part ${partNumber} with an ETag that is no S3 ETag`);
  }
  return text;
}
