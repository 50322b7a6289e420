/**
 * A typed HTTP client for the Coffer API (/openapi.json) on fetch, platform-neutral: no Node built-in, so the browser
 * entry (src/client/browser.ts) uses it as it is; the Node-only streamed uploads (node:http, a Readable body) are in
 * ./sdk-node-upload.ts. The wire types are the server's own TypeBox schemas
 * (src/contract/schemas.ts), imported as types only: there is no second hand-written copy of them, and the
 * client bundle pulls in no server code. Every non-2xx answer becomes a CofferApiError carrying the
 * ErrorResponse `code`, `resolution`, `details` and `Retry-After`.
 */
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
import { ApiTransport, DEFAULT_MAX_RETRIES, type RequestInit } from './sdk-transport.js';
import { eventFrames } from './sdk-events.js';
import { TransferWatch, watchedDownload } from './sdk-transfer.js';
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

export { abortError, causeText, connectionFailure, notTls } from './network-failure.js';
export { DEFAULT_MAX_RETRIES, MAX_RETRY_WAIT_MS } from './sdk-transport.js';
export { ERROR_ANSWER_BYTES, MIN_TRANSFER_RATE, seconds, TransferWatch } from './sdk-transfer.js';

export const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;
export const DEFAULT_STALL_WINDOW_MS = 60_000;
/** Far above any answer a Coffer server gives (a listing of 100,000 backups is about 50 MB). */
export const DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024;

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

/**
 * The API client on fetch alone (no Node built-in): every call of CofferClient (./sdk.ts) but the node:http
 * uploads of the CLI (uploadDirect, putToBlobHost, probeUploadRefusal). The browser's application API uses it.
 */
export class CofferClient {
  readonly baseUrl: string;
  private readonly userAgent: string;
  readonly blobApiUrl: string;
  private readonly requestTimeoutMs: number;
  private readonly stallWindowMs: number;
  private readonly maxAnswerBytes: number;
  private readonly transport: ApiTransport;

  constructor(options: CofferClientOptions) {
    const url = new URL(options.baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`the server URL must be http(s), got ${url.protocol}`);
    }
    this.baseUrl = url.toString().replace(/\/+$/, '');
    this.userAgent = options.userAgent ?? `coffer-sdk/${SDK_VERSION}`;
    this.blobApiUrl = (options.blobApiUrl ?? `${this.baseUrl}/blob`).replace(/\/+$/, '');
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.stallWindowMs = options.stallWindowMs ?? DEFAULT_STALL_WINDOW_MS;
    this.maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
    this.transport = new ApiTransport({
      baseUrl: this.baseUrl,
      apiKey: options.apiKey,
      userAgent: this.userAgent,
      requestTimeoutMs: this.requestTimeoutMs,
      maxAnswerBytes: this.maxAnswerBytes,
      maxRetries: Math.max(0, options.maxRetries ?? DEFAULT_MAX_RETRIES),
      fetch: options.fetch ?? ((input, init) => fetch(input, init)),
    });
  }

  /**
   * Resolves an API path, or a server-announced absolute URL, to an address on the configured server. The API key
   * only ever goes to the configured origin: an announced URL on another origin (for example a server whose
   * COFFER_PUBLIC_URL is wrong, or a hostile one) is re-rooted onto the base URL, keeping its /api/… path and query.
   */
  url(pathOrUrl: string): string {
    return this.transport.url(pathOrUrl);
  }

  /** A request and its whole answer, all under the request deadline (ApiTransport.call). */
  private call(method: string, path: string, init: RequestInit = {}): Promise<{ response: Response; text: string }> {
    return this.transport.call(method, path, init);
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
      headers: (extra) => this.transport.headers(extra),
      userAgent: this.userAgent,
      blobApiUrl: this.blobApiUrl,
      requestTimeoutMs: this.requestTimeoutMs,
      stallWindowMs: this.stallWindowMs,
      maxAnswerBytes: this.maxAnswerBytes,
    };
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
    const { response, done, failure } = await this.transport.open('GET', path, { headers, signal: options.signal });
    if (!response.ok) throw await this.transport.refusal(response, `GET ${path}`, done, failure);
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
    const { response, done, failure } = await this.transport.open('GET', path, { headers: { accept: 'text/event-stream' }, signal });
    if (!response.ok) throw await this.transport.refusal(response, `GET ${path}`, done, failure);
    done();
    if (!response.body) return;
    yield* eventFrames(response.body, this.maxAnswerBytes, new URL(this.baseUrl).origin, `GET ${path}`);
  }
}
