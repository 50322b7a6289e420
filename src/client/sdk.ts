/**
 * A typed HTTP client for the Coffer API (/openapi.json) on fetch, platform-neutral: no Node built-in, so the browser
 * entry (src/client/browser.ts) uses it as it is; the Node-only streamed uploads (node:http, a Readable body) are in
 * ./sdk-node-upload.ts. The wire types are the server's own TypeBox schemas
 * (src/contract/schemas.ts), imported as types only: there is no second hand-written copy of them, and the
 * client bundle pulls in no server code. Every non-2xx answer becomes a CofferApiError carrying the
 * ErrorResponse `code`, `resolution`, `details` and `Retry-After`.
 */
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type {
  BackupAccountBody,
  BackupAccountEnvelopeBody,
  BackupDetailBody,
  BackupFinalizeBody,
  BackupListBody,
  BackupRecordBody,
  BackupStatusEventBody,
  BootstrapResponseBody,
  CreateBackupResponseBody,
  DeleteBackupResponseBody,
  DirectUploadResponseBody,
  ErrorResponseBody,
  HostAccountListBody,
  ResetResponseBody,
  RotateResponseBody,
} from '../contract/schemas.js';
import { CofferApiError, CofferNetworkError, refusalOf } from './errors.js';
import { requireRequestedBackup } from './envelope-format.js';
import { SDK_VERSION } from './sdk-version.js';

export type {
  BackupAccountBody,
  BackupAccountEnvelopeBody,
  BackupDetailBody,
  BackupFinalizeBody,
  BackupListBody,
  BackupRecordBody,
  BackupStatusEventBody,
  BootstrapResponseBody,
  CreateBackupResponseBody,
  DeleteBackupResponseBody,
  DirectUploadResponseBody,
  ErrorResponseBody,
  HostAccountListBody,
  ResetResponseBody,
  RotateResponseBody,
};
export {
  type AnswerHeaders,
  type ApiErrorCode,
  apiError,
  AuthenticationError,
  CadenceError,
  CofferApiError,
  CofferNetworkError,
  ConflictError,
  errorBodyFrom,
  IncompatibleServerError,
  NotFoundError,
  PermissionError,
  QuotaExceededError,
  RateLimitError,
  TooLargeError,
  UnknownErrorCode,
  UploadTooLargeError,
  VaultStateError,
} from './errors.js';
export type HostAccountBody = HostAccountListBody['hosts'][number];

/** One host account of the caller and its backups (CofferClient.listEveryBackup). */
export interface HostBackups extends HostAccountBody {
  backups: BackupRecordBody[];
}
export type BackupStatus = BackupRecordBody['status'];

export interface CofferClientOptions {
  /** Base URL of the server, e.g. http://localhost:8080 */
  baseUrl: string;
  apiKey: string;
  userAgent?: string;
  /** Blob host of the blobhost-client protocol (default: `<baseUrl>/blob`, the one Coffer serves itself). */
  blobApiUrl?: string;
  /** The whole of one API exchange (connect, send, the answer read to its end); default DEFAULT_REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  /** An upload or download fails when it moves less than MIN_TRANSFER_RATE over this much waiting on the network. */
  stallWindowMs?: number;
  /** The largest answer read (a JSON answer, an SSE frame); a larger one fails unread. Default DEFAULT_MAX_ANSWER_BYTES. */
  maxAnswerBytes?: number;
  /**
   * How many times a request is sent again (default DEFAULT_MAX_RETRIES): after a 429 or 503 answer (any method:
   * the server did not act on it) when it asks to wait no longer than MAX_RETRY_WAIT_MS, and after a connection
   * failure or a 502/504 answer of an idempotent request (GET, HEAD). Never after the request deadline passed, a
   * cadence refusal's long wait, or a POST that may have taken effect.
   */
  maxRetries?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** The retries of a request, unless CofferClientOptions.maxRetries says otherwise. */
export const DEFAULT_MAX_RETRIES = 2;
/** The longest wait a retry accepts (Retry-After beyond it: the refusal is the answer, e.g. a cadence's hours). */
export const MAX_RETRY_WAIT_MS = 60_000;
/** The first backoff without Retry-After; each further retry doubles it (with ±25% jitter), up to 8 s. */
const FIRST_BACKOFF_MS = 500;

/** The pause before retry number `attempt` (0-based) when the server names none. */
const backoffMs = (attempt: number) => Math.min(8000, FIRST_BACKOFF_MS * 2 ** attempt) * (0.75 + Math.random() / 2);

const IDEMPOTENT = new Set(['GET', 'HEAD']);

/** The request deadline passed: not retried (a stalled server would stall again). */
class DeadlineError extends CofferNetworkError {}

/** Waits `ms`, or rejects with the caller's abort. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Options of one API request. */
interface RequestInit {
  json?: unknown;
  /** A raw body (an upload); a stream one is sent half-duplex and never retried. */
  body?: ReadableStream<Uint8Array> | Blob | Uint8Array;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /**
   * A public document (the API description): sent without the API key, so that a page of another origin reads it
   * with a simple CORS request (only /api/ answers a preflight).
   */
  public?: boolean;
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;
export const DEFAULT_STALL_WINDOW_MS = 60_000;
/** Far above any answer a Coffer server gives (a listing of 100,000 backups is about 50 MB). */
export const DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024;
/** The slowest transfer that still counts as moving: 1 KiB/s, averaged over a stall window of waiting. */
export const MIN_TRANSFER_RATE = 1024;
/** Of a refusal only its JSON (or the first 200 characters) matter: read no more than this of one. */
export const ERROR_ANSWER_BYTES = 64 * 1024;

/** CofferClient.uploadSettings: what an upload on another transport needs of the client. @internal */
export interface UploadSettings {
  headers(extra?: Record<string, string>): Record<string, string>;
  userAgent: string;
  blobApiUrl: string;
  requestTimeoutMs: number;
  stallWindowMs: number;
  maxAnswerBytes: number;
}

export interface ContentResponse {
  status: 200 | 206;
  headers: Headers;
  /** Total ciphertext size (from Content-Range on 206, Content-Length on 200). */
  totalBytes: number;
  /** First byte offset of the body. */
  start: number;
  etag: string | undefined;
  body: ReadableStream<Uint8Array>;
}

export interface StatusStreamFrame {
  event: 'backup.status' | 'backup.stream.closed' | 'backup.stream.error' | string;
  id: string | undefined;
  data: unknown;
}

/** A request sent and its answer's headers in: see CofferClient.open. */
interface Opened {
  response: Response;
  address: string;
  done: () => void;
  failure: (error: unknown) => unknown;
}

/**
 * The API client on fetch alone (no Node built-in): every call of CofferClient (./sdk.ts) but the node:http
 * uploads of the CLI (uploadDirect, putToBlobHost, probeUploadRefusal). The browser's application API uses it.
 */
export class CofferClient {
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly userAgent: string;
  readonly blobApiUrl: string;
  private readonly requestTimeoutMs: number;
  private readonly stallWindowMs: number;
  private readonly maxAnswerBytes: number;
  private readonly maxRetries: number;
  private readonly fetch: typeof fetch;

  constructor(options: CofferClientOptions) {
    const url = new URL(options.baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`the server URL must be http(s), got ${url.protocol}`);
    }
    this.baseUrl = url.toString().replace(/\/+$/, '');
    this.apiKey = options.apiKey;
    this.userAgent = options.userAgent ?? `coffer-sdk/${SDK_VERSION}`;
    this.blobApiUrl = (options.blobApiUrl ?? `${this.baseUrl}/blob`).replace(/\/+$/, '');
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.stallWindowMs = options.stallWindowMs ?? DEFAULT_STALL_WINDOW_MS;
    this.maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
    this.maxRetries = Math.max(0, options.maxRetries ?? DEFAULT_MAX_RETRIES);
    this.fetch = options.fetch ?? ((input, init) => fetch(input, init));
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.apiKey}`, 'user-agent': this.userAgent, ...extra };
  }

  /**
   * Resolves an API path, or a server-announced absolute URL, to an address on the configured server. The API key
   * only ever goes to the configured origin: an announced URL on another origin (for example a server whose
   * COFFER_PUBLIC_URL is wrong, or a hostile one) is re-rooted onto the base URL, keeping its /api/… path and query.
   */
  url(pathOrUrl: string): string {
    if (pathOrUrl.startsWith('/')) return `${this.baseUrl}${pathOrUrl}`;
    const announced = new URL(pathOrUrl);
    if (announced.origin === new URL(this.baseUrl).origin) return announced.toString();
    const at = announced.pathname.indexOf('/api/');
    return `${this.baseUrl}${at >= 0 ? announced.pathname.slice(at) : announced.pathname}${announced.search}`;
  }

  /**
   * Sends one API request under the request deadline (requestTimeoutMs, from now until `done()`): the caller reads
   * the answer under it and then calls `done()`; a JSON call keeps it to the answer's end, a download or an event
   * stream only to the headers (its body is then read under the stall rule). `failure(error)` is what an error
   * thrown meanwhile means: the caller's abort as is, the deadline as CofferNetworkError, else a network failure.
   */
  private async open(method: string, path: string, init: RequestInit): Promise<Opened> {
    const streamed = init.body instanceof ReadableStream;
    for (let attempt = 0; ; attempt++) {
      const retries = !streamed && attempt < this.maxRetries;
      let opened: Opened;
      try {
        opened = await this.attempt(method, path, init);
      } catch (error) {
        const again = retries && IDEMPOTENT.has(method) && error instanceof CofferNetworkError && !(error instanceof DeadlineError);
        if (!again || init.signal?.aborted) throw error;
        await pause(backoffMs(attempt), init.signal);
        continue;
      }
      const wait = retries ? this.retryWait(method, opened.response, attempt) : undefined;
      if (wait === undefined) return opened;
      opened.done();
      await opened.response.body?.cancel().catch(() => undefined);
      await pause(wait, init.signal);
    }
  }

  /** How long to wait before sending a request again after this answer, or undefined: the answer stands. */
  private retryWait(method: string, response: Response, attempt: number): number | undefined {
    const status = response.status;
    const retryable = status === 429 || status === 503 || (IDEMPOTENT.has(method) && (status === 502 || status === 504));
    if (!retryable) return undefined;
    const named = new CofferApiError(status, { error: '', code: '', message: '', resolution: '' }, response.headers).retryAfter;
    const wait = named === undefined ? backoffMs(attempt) : named * 1000;
    return wait <= MAX_RETRY_WAIT_MS ? wait : undefined;
  }

  /** One sending of a request (open's retries call it again). */
  private async attempt(method: string, path: string, init: RequestInit): Promise<Opened> {
    const headers = init.public ? { 'user-agent': this.userAgent, ...init.headers } : this.headers(init.headers);
    const requestTimeoutMs = this.requestTimeoutMs;
    let body: string | ReadableStream<Uint8Array> | Blob | Uint8Array | undefined = init.body;
    if (init.json !== undefined) {
      body = JSON.stringify(init.json);
      headers['content-type'] = 'application/json';
    }
    const address = this.url(path);
    const deadline = new AbortController();
    // An upload's body takes its own time to send: a known length adds what it takes at MIN_TRANSFER_RATE; a stream
    // restarts the deadline with each piece it gives (the deadline is then for a stall, not for the whole body).
    const expire = () => deadline.abort(this.noAnswer(method, address));
    let timer = setTimeout(expire, this.requestTimeoutMs + sendingAllowanceMs(body));
    const done = () => clearTimeout(timer);
    if (body instanceof ReadableStream) {
      body = body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            done();
            timer = setTimeout(expire, requestTimeoutMs);
            controller.enqueue(chunk);
          },
        }),
      );
    }
    const failure = (error: unknown): unknown => {
      done();
      if (init.signal?.aborted) return error;
      if (deadline.signal.aborted) return deadline.signal.reason;
      if (error instanceof CofferNetworkError) return error;
      return new CofferNetworkError(connectionFailure(address, error), { cause: error });
    };
    const signal = init.signal ? AbortSignal.any([init.signal, deadline.signal]) : deadline.signal;
    try {
      const duplex = body instanceof ReadableStream ? { duplex: 'half' } : {};
      const response = await this.fetch(address, { method, headers, body: body as BodyInit | undefined, signal, ...duplex });
      return { response, address, done, failure };
    } catch (error) {
      throw failure(error);
    }
  }

  private noAnswer(method: string, address: string): CofferNetworkError {
    const url = new URL(address);
    return new DeadlineError(
      `the server at ${url.origin} did not answer ${method} ${url.pathname} within ${seconds(this.requestTimeoutMs)} ` +
        '(COFFER_REQUEST_TIMEOUT): a stalled server or proxy',
    );
  }

  /** A request and its whole answer, all under the request deadline: the answer's text, at most maxAnswerBytes. */
  private async call(method: string, path: string, init: RequestInit = {}): Promise<{ response: Response; text: string }> {
    const { response, address, done, failure } = await this.open(method, path, init);
    try {
      const limit = response.ok ? this.maxAnswerBytes : ERROR_ANSWER_BYTES;
      const text = await readAnswer(response, limit, `${method} ${new URL(address).pathname}`, new URL(address).origin);
      done();
      return { response, text };
    } catch (error) {
      throw failure(error);
    }
  }

  private async request<T>(method: string, path: string, init: RequestInit = {}): Promise<T> {
    const { response, text } = await this.call(method, path, init);
    return this.parse<T>(response, text);
  }

  private parse<T>(response: Response, text: string): T {
    if (!response.ok) throw refusalOf(response.status, text, response.headers, response.url);
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new CofferNetworkError(
        `the server at ${this.baseUrl} answered with something that is not JSON: check that COFFER_URL points at a Coffer server`,
      );
    }
  }

  // ---- account ----

  async getAccount(signal?: AbortSignal): Promise<BackupAccountBody> {
    return (await this.readAccount(signal)).account;
  }

  /** The account and the ETag of its vault material (undefined from a server that sends none, or without a vault). */
  async readAccount(signal?: AbortSignal): Promise<{ account: BackupAccountBody; etag: string | undefined }> {
    const { response, text } = await this.call('GET', '/api/backup-account', { signal });
    return { account: this.parse<BackupAccountBody>(response, text), etag: response.headers.get('etag') ?? undefined };
  }

  bootstrap(envelope: BackupAccountEnvelopeBody, signal?: AbortSignal): Promise<BootstrapResponseBody> {
    return this.request('POST', '/api/backup-account/bootstrap', { json: envelope, signal });
  }

  /**
   * Replaces the vault material. With `ifMatch` (the ETag read with the material) the server rotates only while the
   * stored material is still that one, else CofferApiError 409 `vault_changed` and nothing changes.
   */
  async rotate(envelope: BackupAccountEnvelopeBody, signal?: AbortSignal, ifMatch?: string): Promise<RotateResponseBody> {
    return (await this.rotateWithHistory(envelope, signal, ifMatch)).account;
  }

  /**
   * rotate, and how many days the server says it keeps the replaced envelope restorable (header
   * X-Coffer-Vault-History-Days): null when it does not say (an older server) or says something malformed. Only
   * informative: the server's word, never a guarantee the client can check.
   */
  async rotateWithHistory(
    envelope: BackupAccountEnvelopeBody,
    signal?: AbortSignal,
    ifMatch?: string,
  ): Promise<{ account: RotateResponseBody; historyDays: number | null }> {
    const headers = ifMatch === undefined ? undefined : { 'if-match': ifMatch };
    const { response, text } = await this.call('POST', '/api/backup-account/rotate', { json: envelope, headers, signal });
    const account = this.parse<RotateResponseBody>(response, text);
    const days = response.headers.get('x-coffer-vault-history-days');
    return { account, historyDays: days !== null && /^\d{1,4}$/.test(days) ? Number(days) : null };
  }

  reset(options: { deleteBackups?: boolean } = {}, signal?: AbortSignal): Promise<ResetResponseBody> {
    return this.request('POST', '/api/backup-account/reset', { json: { deleteBackups: !!options.deleteBackups }, signal });
  }

  // ---- backups ----

  listBackups(signal?: AbortSignal): Promise<BackupListBody> {
    return this.request('GET', '/api/backups', { signal });
  }

  /** The caller's host accounts (docs/api-rules.md#host-accounts); a server without them answers none. */
  async listHostAccounts(signal?: AbortSignal): Promise<HostAccountListBody> {
    try {
      return await this.request<HostAccountListBody>('GET', '/api/host-accounts', { signal });
    } catch (error) {
      // A server from before host accounts: the route is unknown (404 not_found), so there are none.
      if (error instanceof CofferApiError && error.status === 404 && error.code === 'not_found') return { hosts: [] };
      throw error;
    }
  }

  /** One host account's visible backups, newest first. */
  listHostBackups(accountId: string, signal?: AbortSignal): Promise<BackupListBody> {
    return this.request('GET', `/api/host-accounts/${encodeURIComponent(accountId)}/backups`, { signal });
  }

  /** The caller's backups, and each of its host accounts' (read with the caller's own key: no key per host). */
  async listEveryBackup(signal?: AbortSignal): Promise<BackupListBody & { hosts: HostBackups[] }> {
    const own = await this.listBackups(signal);
    const { hosts } = await this.listHostAccounts(signal);
    const withBackups: HostBackups[] = [];
    for (const host of hosts) withBackups.push({ ...host, backups: (await this.listHostBackups(host.accountId, signal)).backups });
    return { ...own, hosts: withBackups };
  }

  async createBackup(signal?: AbortSignal): Promise<CreateBackupResponseBody> {
    return (await this.openSlot(signal)).slot;
  }

  /**
   * `POST /api/backups`, with the largest archive the server accepts when it announces one (the
   * `Coffer-Max-Archive-Bytes` header of the 201; undefined from a server that does not).
   */
  async openSlot(signal?: AbortSignal): Promise<{ slot: CreateBackupResponseBody; maxArchiveBytes: number | undefined }> {
    const { response, text } = await this.call('POST', '/api/backups', { signal });
    const slot = this.parse<CreateBackupResponseBody>(response, text);
    const announced = response.headers.get('coffer-max-archive-bytes');
    const max = announced !== null && /^\d{1,16}$/.test(announced.trim()) ? Number(announced) : NaN;
    return { slot, maxArchiveBytes: Number.isSafeInteger(max) && max > 0 ? max : undefined };
  }

  /** The backup asked for; an answer about another backup is an IntegrityError (requireRequestedBackup). */
  async getBackup(id: string, signal?: AbortSignal): Promise<BackupDetailBody> {
    return requireRequestedBackup(id, await this.request<BackupDetailBody>('GET', `/api/backups/${encodeURIComponent(id)}`, { signal }));
  }

  deleteBackup(id: string, signal?: AbortSignal): Promise<DeleteBackupResponseBody> {
    return this.request('DELETE', `/api/backups/${encodeURIComponent(id)}`, { signal });
  }

  finalizeBackup(id: string, body: BackupFinalizeBody, signal?: AbortSignal): Promise<BackupDetailBody> {
    return this.request('POST', `/api/backups/${encodeURIComponent(id)}/finalize`, { json: body, signal });
  }

  /** The direct-upload address of a slot (on the configured origin). */
  directUploadUrl(backupId: string, announced?: string): string {
    return this.url(announced ?? `/api/backups/upload?backupId=${encodeURIComponent(backupId)}`);
  }

  /**
   * Sends `upload.body` as the ciphertext of a slot (direct protocol) with fetch: a Blob or bytes with their
   * length, a ReadableStream chunked (half-duplex; Node's fetch streams it, a browser's only over HTTP/2). The
   * application API's upload (src/client/app/); the CLI's stays uploadDirect (node:http, the stall rule).
   */
  async uploadBody(
    uploadUrl: string,
    upload: { body: ReadableStream<Uint8Array> | Blob | Uint8Array; contentLength?: number },
    options: { signal?: AbortSignal } = {},
  ): Promise<DirectUploadResponseBody> {
    const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
    if (upload.contentLength !== undefined) headers['content-length'] = String(upload.contentLength);
    return this.request('POST', uploadUrl, { body: upload.body, headers, signal: options.signal });
  }

  /**
   * The version of the API description the server serves (`info.version` of /openapi.json), or undefined when it
   * serves none (no Coffer server): the answer is not JSON, or names no version.
   */
  async apiVersion(signal?: AbortSignal): Promise<string | undefined> {
    let text: string;
    try {
      const answer = await this.call('GET', '/openapi.json', { signal, public: true });
      if (!answer.response.ok) return undefined;
      text = answer.text;
    } catch (error) {
      if (error instanceof CofferNetworkError && /sent more than/.test(error.message)) return undefined;
      throw error;
    }
    try {
      const version = (JSON.parse(text) as { info?: { version?: unknown } } | null)?.info?.version;
      return typeof version === 'string' ? version : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The blobhost-client protocol (docs/upload-protocols.md), step 1: ask `handleUploadUrl` (with the API key)
   * for a client token for the slot's `blobPath`.
   */
  async negotiateBlobUpload(handleUploadUrl: string, blobPath: string, signal?: AbortSignal): Promise<string> {
    const negotiation = await this.request<{ type?: string; clientToken?: string }>('POST', handleUploadUrl, {
      json: { type: 'blob.generate-client-token', payload: { pathname: blobPath, clientPayload: null, multipart: false } },
      signal,
    });
    if (typeof negotiation.clientToken !== 'string') {
      throw new CofferNetworkError('the upload negotiation answer has no clientToken');
    }
    return negotiation.clientToken;
  }

  /**
   * What an upload made outside this class (./sdk-node-upload.ts, on node:http) needs of it: the API request
   * headers (with the key), the blob host, the deadlines and the answer limit.
   * @internal
   */
  uploadSettings(): UploadSettings {
    return {
      headers: (extra) => this.headers(extra),
      userAgent: this.userAgent,
      blobApiUrl: this.blobApiUrl,
      requestTimeoutMs: this.requestTimeoutMs,
      stallWindowMs: this.stallWindowMs,
      maxAnswerBytes: this.maxAnswerBytes,
    };
  }

  /** A refusal of a streamed request (its answer read under the request deadline) as the CofferApiError it is. */
  private async refusal(response: Response, what: string, done: () => void, failure: (error: unknown) => unknown) {
    let text: string;
    try {
      text = await readAnswer(response, ERROR_ANSWER_BYTES, what, this.baseUrl);
    } catch (error) {
      throw failure(error);
    }
    done();
    return refusalOf(response.status, text, response.headers);
  }

  /**
   * Opens the ciphertext of a READY backup. With `from` > 0 asks for the rest (`Range: bytes=from-`), guarded
   * by `If-Range: etag` so a changed blob answers 200 (whole body) instead of a wrong tail.
   */
  async openContent(id: string, options: { from?: number; etag?: string; signal?: AbortSignal } = {}): Promise<ContentResponse> {
    const headers: Record<string, string> = {};
    if (options.from && options.from > 0) {
      headers.range = `bytes=${options.from}-`;
      if (options.etag) headers['if-range'] = options.etag;
    }
    const path = `/api/backups/${encodeURIComponent(id)}/content`;
    const { response, done, failure } = await this.open('GET', path, { headers, signal: options.signal });
    if (!response.ok) throw await this.refusal(response, `GET ${path}`, done, failure);
    done();
    if (!response.body) throw new CofferNetworkError('the content answer has no body');
    const etag = response.headers.get('etag') ?? undefined;
    const body = watchedDownload(response.body, new TransferWatch(this.stallWindowMs, `the download from ${new URL(this.baseUrl).origin}`));
    if (response.status === 206) {
      const match = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(response.headers.get('content-range') ?? '');
      if (!match) {
        await body.cancel();
        throw new CofferNetworkError('a 206 answer without a usable Content-Range');
      }
      return { status: 206, headers: response.headers, start: Number(match[1]), totalBytes: Number(match[3]), etag, body };
    }
    const length = Number(response.headers.get('content-length'));
    return {
      status: 200,
      headers: response.headers,
      start: 0,
      totalBytes: Number.isSafeInteger(length) ? length : NaN,
      etag,
      body,
    };
  }

  /** Follows GET /api/backups/{id}/events: yields each frame with its JSON data parsed, until the server closes. */
  async *statusEvents(id: string, signal?: AbortSignal): AsyncGenerator<StatusStreamFrame> {
    const path = `/api/backups/${encodeURIComponent(id)}/events`;
    const { response, done, failure } = await this.open('GET', path, { headers: { accept: 'text/event-stream' }, signal });
    if (!response.ok) throw await this.refusal(response, `GET ${path}`, done, failure);
    done();
    if (!response.body) return;
    // The parser keeps an unfinished frame in memory: a frame larger than maxAnswerBytes fails instead.
    let sinceFrame = 0;
    const limit = this.maxAnswerBytes;
    const origin = new URL(this.baseUrl).origin;
    const capped = new TransformStream<Uint8Array, BufferSource>({
      transform(chunk, controller) {
        sinceFrame += chunk.byteLength;
        if (sinceFrame > limit) throw new CofferNetworkError(tooLargeText(origin, `GET ${path}`, limit));
        controller.enqueue(chunk as Uint8Array<ArrayBuffer>);
      },
    });
    const frames = response.body
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
}

/** The time a body of known length may take to send at MIN_TRANSFER_RATE, on top of the request deadline. */
function sendingAllowanceMs(body: string | ReadableStream<Uint8Array> | Blob | Uint8Array | undefined): number {
  const size = body instanceof Blob ? body.size : body instanceof Uint8Array ? body.byteLength : 0;
  return (size / MIN_TRANSFER_RATE) * 1000;
}

/** @internal A duration in words ("2 s", "1.5 s"). */
export const seconds = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`);

const tooLargeText = (origin: string, what: string, limit: number) =>
  `the server at ${origin} sent more than ${Math.round(limit / 1048576) || limit} ${limit >= 1048576 ? 'MiB' : 'bytes'} ` +
  `in answer to ${what}: stopped reading (no Coffer answer is that large; check that COFFER_URL points at a Coffer server)`;

/**
 * The answer's text, read as a stream and stopped at `limit` bytes: over it, a JSON answer fails (CofferNetworkError)
 * without ever holding more than the limit; a refusal's (ERROR_ANSWER_BYTES) is cut there instead (only its start
 * matters).
 */
async function readAnswer(response: Response, limit: number, what: string, server: string): Promise<string> {
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
function watchedDownload(source: ReadableStream<Uint8Array>, watch: TransferWatch): ReadableStream<Uint8Array> {
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

export function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('aborted');
}

/** Whether a connection failed because the other side answered a TLS hello in plain text (a plain-HTTP server). */
export function notTls(error: unknown): boolean {
  for (let current = error, depth = 0; depth < 5 && current instanceof Error; depth++, current = current.cause) {
    const code = (current as Error & { code?: string }).code;
    if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG') return true;
    if (/wrong version number|packet length too long/.test(current.message)) return true;
  }
  return false;
}

/**
 * Why a connection to `address` failed, in words: OpenSSL's text for a plain-HTTP server reached over https://
 * (`ssl3_get_record:wrong version number`) says nothing a user can act on, so it is named as what it is.
 */
export function connectionFailure(address: string, error: unknown): string {
  const url = new URL(address);
  if (url.protocol === 'https:' && notTls(error)) {
    const plain = new URL(url.origin);
    plain.protocol = 'http:';
    return `the server at ${url.origin} does not speak HTTPS (it answered in plain HTTP); if that is right, use ${plain.origin}`;
  }
  return `cannot reach ${url.origin}: ${causeText(error)}`;
}

/** The innermost useful message of a fetch/socket failure (undici wraps the real cause). */
export function causeText(error: unknown): string {
  let current: unknown = error;
  let text = error instanceof Error ? error.message : String(error);
  for (let depth = 0; depth < 4 && current instanceof Error && current.cause !== undefined; depth++) {
    current = current.cause;
    if (current instanceof Error) text = current.message || (current as Error & { code?: string }).code || text;
  }
  return text;
}
