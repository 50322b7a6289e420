/**
 * What the application API (./coffer.ts, ./entries.ts) needs from the runtime it runs on. The application layer
 * itself imports no Node built-in and no DOM-only API: it works on web streams (`ReadableStream`,
 * `TransformStream`), `Uint8Array`, async iterables, `fetch` and the envelope core (../envelope-core.ts) over the
 * platform's libsodium primitives. A platform supplies the rest:
 *
 *  - Node (../node.ts): sodium-native primitives, node:zlib / zstd streams, node:crypto SHA-256, and the
 *    CofferClient of ../sdk.ts (its uploads stream the ciphertext with `duplex: 'half'`).
 *  - The browser (../browser.ts): libsodium in WebAssembly, CompressionStream('gzip') to write, the checked
 *    gzip/zstd readers of ../compression-core.ts to read, a SHA-256 in JavaScript, and CofferClient
 *    (../sdk.ts: fetch alone, no Node built-in) whose uploads send a Blob assembled from the encrypted
 *    chunks (Chromium streams a request body only over HTTP/2).
 *
 * Everything here is an interface: implementing it is all a new runtime takes.
 */
import type { Primitives } from '../envelope-primitives.js';
import type { Compression } from '../envelope-format.js';
import type {
  BackupAccountBody,
  BackupAccountEnvelopeBody,
  BackupDetailBody,
  BackupFinalizeBody,
  BackupListBody,
  BootstrapResponseBody,
  ContentResponse,
  CreateBackupResponseBody,
  DeleteBackupResponseBody,
  DirectUploadResponseBody,
  StatusStreamFrame,
} from '../sdk.js';

/** A stage of a byte pipeline (a TransformStream, or any writable/readable pair such as Node's Duplex.toWeb). */
export interface ByteStage {
  writable: WritableStream<Uint8Array>;
  readable: ReadableStream<Uint8Array>;
}

/** An incremental SHA-256 (the sealed `plaintextSha256` of docs/crypto.md §3). */
export interface Sha256 {
  update(bytes: Uint8Array): void;
  /** The digest as 64 lowercase hex digits; the hasher is spent afterwards. */
  hexDigest(): string;
}

/** What an upload sends: a body `fetch` can carry, and its exact length when the platform knows it. */
export interface UploadBody {
  body: ReadableStream<Uint8Array> | Blob | Uint8Array;
  /** Exact bytes (a Blob's or bytes' size); undefined for a stream sent chunked. */
  contentLength?: number;
}

/**
 * The API calls the application layer makes: the subset of CofferClient (../sdk.ts) it uses, plus `uploadBody`,
 * the direct-protocol upload of a body `fetch` can send. Every call rejects with the typed errors of ../errors.ts.
 */
export interface CofferApi {
  readonly baseUrl: string;
  getAccount(signal?: AbortSignal): Promise<BackupAccountBody>;
  bootstrap(envelope: BackupAccountEnvelopeBody, signal?: AbortSignal): Promise<BootstrapResponseBody>;
  listBackups(signal?: AbortSignal): Promise<BackupListBody>;
  getBackup(id: string, signal?: AbortSignal): Promise<BackupDetailBody>;
  deleteBackup(id: string, signal?: AbortSignal): Promise<DeleteBackupResponseBody>;
  openSlot(
    signal?: AbortSignal,
  ): Promise<{ slot: CreateBackupResponseBody; maxArchiveBytes: number | undefined; presignedUpload?: boolean }>;
  finalizeBackup(id: string, body: BackupFinalizeBody, signal?: AbortSignal): Promise<BackupDetailBody>;
  openContent(id: string, options?: { from?: number; etag?: string; signal?: AbortSignal }): Promise<ContentResponse>;
  /** openContent from the object store where the backup's record offers it (s3-presigned-download), else the server. */
  openBackupContent?(id: string, options?: { from?: number; etag?: string; signal?: AbortSignal }): Promise<ContentResponse>;
  statusEvents(id: string, signal?: AbortSignal): AsyncGenerator<StatusStreamFrame>;
  /** POSTs `upload.body` to a slot's direct-upload URL (announced by the server, kept on the configured origin). */
  uploadBody(uploadUrl: string, upload: UploadBody, options?: { signal?: AbortSignal }): Promise<DirectUploadResponseBody>;
  /** The server's API description version (`info.version` of /openapi.json); see ./version.ts. */
  apiVersion(signal?: AbortSignal): Promise<string | undefined>;
}

/** How `connect` reaches the server; the platform builds its API client from these. */
export interface ApiOptions {
  url: string;
  apiKey: string;
  /** The deadline of one API exchange (default: DEFAULT_REQUEST_TIMEOUT_MS of ../sdk.ts, 120 s). */
  timeoutMs?: number;
  /** Retries of an idempotent request or a 429/503 answer (default 2). */
  maxRetries?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** One runtime's implementation of what the application layer cannot do in plain web-platform code. */
export interface Platform {
  /** The finalize request's `clientVersion` (e.g. "coffer-sdk/0.1.0 node"). */
  clientVersion: string;
  /** libsodium's primitives for the envelope core (Node: sodium-native; browser: libsodium-wrappers-sumo). */
  primitives: Primitives;
  /** The compression new backups are written with ('zstd' where the runtime has it, else 'gzip'). */
  writeCompression: Compression;
  /** A compressor of `compression` (one zstd frame or one gzip member, docs/crypto.md §4). */
  compress(compression: Compression): ByteStage;
  /**
   * A decompressor that applies the readers' rules of ../compression-core.ts: exactly one frame or member,
   * nothing after it, at most `sealedSize` bytes out (else IntegrityError).
   */
  decompress(compression: Compression, sealedSize: number): ByteStage;
  /** A fresh incremental SHA-256. */
  sha256(): Sha256;
  /**
   * What an upload of this ciphertext sends: Node streams it; a browser collects it into a Blob (the ciphertext
   * of a backup is bounded by the server's archive limit).
   */
  uploadBody(ciphertext: ReadableStream<Uint8Array>, signal?: AbortSignal): Promise<UploadBody>;
  /**
   * Uploads the ciphertext straight to the object store where the slot's server offers it (s3-presigned-upload), or
   * gives it back whole (`rest`, from its first byte) when the store cannot be reached. Absent: always the server.
   */
  uploadToStore?(
    api: CofferApi,
    backupId: string,
    ciphertext: ReadableStream<Uint8Array>,
    options: { signal?: AbortSignal; maxBytes: number },
  ): Promise<{ uploaded: true; size: number } | { uploaded: false; rest: ReadableStream<Uint8Array> }>;
  /** The API client of this runtime. */
  api(options: ApiOptions): CofferApi;
}
