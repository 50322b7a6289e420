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
import { IntegrityError, requireRequestedBackup } from './envelope-format.js';
import { ApiTransport, DEFAULT_MAX_RETRIES, type RequestInit } from './sdk-transport.js';
import { eventFrames } from './sdk-events.js';
import { TransferWatch, watchedDownload } from './sdk-transfer.js';
import { SDK_VERSION } from './sdk-version.js';
import {
  extensionsOf,
  parseComplete,
  parseContentUrl,
  parsePart,
  parseStart,
  PRESIGNED_DOWNLOAD,
  PRESIGNED_UPLOAD,
  StoreUnreachableError,
  type ContentUrl,
  type PresignedComplete,
  type PresignedStart,
  type SignedRequest,
} from './presigned.js';
import { openStoreContent, type StoreContent } from './presigned-download.js';
import {
  parseAttestationList,
  parseShownAttestation,
  requireAttestationOf,
  type AttestationBody,
  type AttestationListBody,
  type AttestationRequestBody,
} from './attestation.js';

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
export type { AttestationBody, AttestationListBody, AttestationPayloadBody, AttestationRequestBody } from './attestation.js';
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

export {
  type ContentUrl,
  type PresignedComplete,
  type PresignedStart,
  type SignedRequest,
  PresignedAnswerError,
  StoreRefusalError,
  StoreUnreachableError,
  PRESIGNED_DOWNLOAD,
  PRESIGNED_UPLOAD,
} from './presigned.js';
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

/** A backup's record and whether its answer announced PRESIGNED_DOWNLOAD. */
interface BackupRecordAnswer {
  detail: BackupDetailBody;
  offered: boolean;
}

/** A content URL is not used for a new request this close to its expiry. */
const URL_MARGIN_MS = 5000;
/** How many backups a client remembers download offers and content URLs of. */
const MEMO_ENTRIES = 256;

/** Sets `key` in a memo of at most MEMO_ENTRIES entries (the oldest goes first). */
function remember<V>(memo: Map<string, V>, key: string, value: V): void {
  memo.delete(key);
  memo.set(key, value);
  if (memo.size > MEMO_ENTRIES) memo.delete(memo.keys().next().value!);
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
  private readonly fetchImpl: typeof fetch;
  /** Whether each backup's last record announced PRESIGNED_DOWNLOAD (at most MEMO_ENTRIES kept). */
  private readonly downloadOffers = new Map<string, boolean>();
  /** A record request in flight: a restore's download and its key opening ask for the record at once, and share it. */
  private readonly recordsInFlight = new Map<string, { signal: AbortSignal | undefined; answer: Promise<BackupRecordAnswer> }>();
  /** The content URL of each backup being downloaded from the store, reused until it expires. */
  private readonly contentUrls = new Map<string, ContentUrl>();
  /** Backups whose store could not be reached before any byte came: their download goes through /content. */
  private readonly storeUnreachable = new Set<string>();

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
    this.fetchImpl = options.fetch ?? ((input, init) => fetch(input, init));
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
   * `Coffer-Max-Archive-Bytes` header of the 201; undefined from a server that does not), and whether it offers the
   * slot's upload straight to its store (`Coffer-Extensions: s3-presigned-upload`).
   */
  async openSlot(
    signal?: AbortSignal,
  ): Promise<{ slot: CreateBackupResponseBody; maxArchiveBytes: number | undefined; presignedUpload: boolean }> {
    const { response, text } = await this.call('POST', '/api/backups', { signal });
    const slot = this.parse<CreateBackupResponseBody>(response, text);
    const announced = response.headers.get('coffer-max-archive-bytes');
    const max = announced !== null && /^\d{1,16}$/.test(announced.trim()) ? Number(announced) : NaN;
    return {
      slot,
      maxArchiveBytes: Number.isSafeInteger(max) && max > 0 ? max : undefined,
      presignedUpload: extensionsOf(response.headers).has(PRESIGNED_UPLOAD),
    };
  }

  /** The backup asked for; an answer about another backup is an IntegrityError (requireRequestedBackup). */
  async getBackup(id: string, signal?: AbortSignal): Promise<BackupDetailBody> {
    return (await this.backupRecord(id, signal)).detail;
  }

  /**
   * The backup's record and whether the server offers its download from the store (PRESIGNED_DOWNLOAD). A request
   * for the same record with the same signal while one is in flight shares its answer.
   */
  private backupRecord(id: string, signal: AbortSignal | undefined): Promise<BackupRecordAnswer> {
    const pending = this.recordsInFlight.get(id);
    if (pending && pending.signal === signal) return pending.answer;
    const answer = (async () => {
      const { response, text } = await this.call('GET', `/api/backups/${encodeURIComponent(id)}`, { signal });
      const detail = requireRequestedBackup(id, this.parse<BackupDetailBody>(response, text));
      const offered = extensionsOf(response.headers).has(PRESIGNED_DOWNLOAD);
      remember(this.downloadOffers, id, offered);
      return { detail, offered };
    })();
    this.recordsInFlight.set(id, { signal, answer });
    const forget = () => {
      if (this.recordsInFlight.get(id)?.answer === answer) this.recordsInFlight.delete(id);
    };
    answer.then(forget, forget);
    return answer;
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

  /**
   * Opens the ciphertext of a READY backup as openContent does, from the store under a presigned URL where the
   * backup's record announces PRESIGNED_DOWNLOAD (GET /api/backups/{id}/content-url), else from the server. A store
   * that cannot be reached before any byte came (`from` 0), or a server without content-url (404), sends this and
   * every later read of the backup to /content. An expired URL is asked for again once. `source` says which answered;
   * a resumed read goes to the same one (its `etag` is that source's).
   */
  async openBackupContent(
    id: string,
    options: { from?: number; etag?: string; signal?: AbortSignal } = {},
  ): Promise<ContentResponse & { source: 'store' | 'server' }> {
    if (!this.storeUnreachable.has(id)) {
      const offered = this.downloadOffers.get(id) ?? (await this.backupRecord(id, options.signal)).offered;
      if (offered) {
        const opened = await this.openFromStore(id, options);
        if (opened) return { ...opened, source: 'store' };
      }
    }
    return { ...(await this.openContent(id, options)), source: 'server' };
  }

  /** The store's answer for openBackupContent, or undefined: the server's way instead. */
  private async openFromStore(id: string, options: { from?: number; etag?: string; signal?: AbortSignal }) {
    for (let asked = 0; ; asked++) {
      let link = this.contentUrls.get(id);
      // A URL about to expire is not used for a new request: the store checks the expiry when the request comes.
      if (!link || link.expiresAt - Date.now() < URL_MARGIN_MS) {
        link = await this.contentUrl(id, options.signal);
        if (!link) {
          remember(this.downloadOffers, id, false);
          return undefined;
        }
        remember(this.contentUrls, id, link);
      }
      const settings = {
        ...options,
        userAgent: this.userAgent,
        requestTimeoutMs: this.requestTimeoutMs,
        stallWindowMs: this.stallWindowMs,
      };
      let opened: StoreContent;
      try {
        opened = await openStoreContent(this.fetchImpl, link, settings);
      } catch (error) {
        if (error instanceof StoreUnreachableError && !options.from && !options.signal?.aborted) {
          this.storeUnreachable.add(id);
          return undefined;
        }
        throw error;
      }
      if (opened.status !== 'expired') return opened;
      this.contentUrls.delete(id);
      if (asked > 0) {
        throw new CofferNetworkError(`the store at ${new URL(link.url).origin} refused a fresh download URL (HTTP 403)`);
      }
    }
  }

  /**
   * `GET /api/backups/{id}/content-url`: a short-lived URL of the backup's ciphertext in the store, or undefined
   * from a server that offers none (404 not_found, as for an unknown route).
   */
  async contentUrl(id: string, signal?: AbortSignal): Promise<ContentUrl | undefined> {
    const { response, text } = await this.call('GET', `/api/backups/${encodeURIComponent(id)}/content-url`, { signal });
    if (response.status === 404) {
      const refusal = refusalOf(response.status, text, response.headers, response.url);
      if (refusal.code === 'not_found') return undefined;
      throw refusal;
    }
    return parseContentUrl(this.parse<unknown>(response, text));
  }

  // ---- restore attestations (docs/crypto.md#restore-attestations): the server stores and shows them, never checks them ----

  /**
   * `POST /api/backups/{id}/attestations`: records a drill's attestation (signAttestation's body) for a READY backup;
   * the server's record of it. An answer about another backup, or holding other bytes than those sent, is an
   * IntegrityError.
   */
  async recordAttestation(backupId: string, body: AttestationRequestBody, signal?: AbortSignal): Promise<AttestationBody> {
    const path = `/api/backups/${encodeURIComponent(backupId)}/attestations`;
    const answer = await this.request<unknown>('POST', path, { json: { payload: body.payload, mac: body.mac }, signal });
    const recorded = requireAttestationOf(backupId, parseShownAttestation(answer, 'recorded attestation'));
    if (recorded.payload !== body.payload || recorded.mac !== body.mac) {
      throw new IntegrityError('the server recorded another attestation than the one sent');
    }
    return recorded;
  }

  /**
   * One backup's attestations (`GET /api/backups/{id}/attestations`), or, without a backup id, those of every backup
   * the caller reads (`GET /api/attestations`, at most `limit`, the server's default 200), newest first. Each is the
   * server's word until verifyAttestation checks it with the vault's keys.
   */
  async listAttestations(backupId?: string, options: { limit?: number; signal?: AbortSignal } = {}): Promise<AttestationListBody> {
    if (backupId !== undefined) {
      const answer = await this.request<unknown>('GET', `/api/backups/${encodeURIComponent(backupId)}/attestations`, {
        signal: options.signal,
      });
      return parseAttestationList(answer, backupId);
    }
    if (options.limit !== undefined && !(Number.isSafeInteger(options.limit) && options.limit > 0)) {
      throw new RangeError(`limit must be a positive integer, not ${options.limit}`);
    }
    const query = options.limit === undefined ? '' : `?limit=${options.limit}`;
    return parseAttestationList(await this.request<unknown>('GET', `/api/attestations${query}`, { signal: options.signal }));
  }

  // ---- presigned uploads (docs/upload-protocols.md, s3-presigned): the negotiation, on the API key ----

  /**
   * `s3-presigned.start`: with `size`, one signed PUT of exactly that many bytes (reserved against the quota now);
   * without, a multipart upload whose parts are signed one by one (presignPart). @internal
   */
  async presignStart(backupId: string, size: number | undefined, signal?: AbortSignal): Promise<PresignedStart> {
    const payload = size === undefined ? { backupId } : { backupId, size };
    return parseStart(await this.negotiate('s3-presigned.start', payload, signal), size);
  }

  /** `s3-presigned.part`: a signed PUT of part `partNumber`, exactly `size` bytes (the reservation grows). @internal */
  async presignPart(
    upload: { backupId: string; uploadKey: string; uploadId: string },
    partNumber: number,
    size: number,
    signal?: AbortSignal,
  ): Promise<SignedRequest> {
    const payload = { backupId: upload.backupId, uploadKey: upload.uploadKey, uploadId: upload.uploadId, partNumber, size };
    return parsePart(await this.negotiate('s3-presigned.part', payload, signal), partNumber, size);
  }

  /**
   * `s3-presigned.complete`: the server completes a multipart upload with `parts`, checks the stored object's size
   * and marks the slot UPLOADED. Sent again after a lost answer, it answers the same. @internal
   */
  async presignComplete(
    upload: { backupId: string; uploadKey: string; uploadId?: string; parts?: { partNumber: number; etag: string }[] },
    size: number,
    signal?: AbortSignal,
  ): Promise<PresignedComplete> {
    return parseComplete(await this.negotiate('s3-presigned.complete', { ...upload, size }, signal), size);
  }

  /** `s3-presigned.abort`: the upload's object and parts are removed, its reservation released. @internal */
  async presignAbort(upload: { backupId: string; uploadKey: string; uploadId?: string }, signal?: AbortSignal): Promise<void> {
    await this.negotiate('s3-presigned.abort', upload, signal);
  }

  private negotiate(type: string, payload: Record<string, unknown>, signal: AbortSignal | undefined): Promise<unknown> {
    return this.request<unknown>('POST', '/api/backups/upload', { json: { type, payload }, signal });
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
