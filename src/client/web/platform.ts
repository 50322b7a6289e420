/**
 * The Platform of the application API (../app/platform.ts) in a browser: libsodium in WebAssembly
 * (./primitives.ts), CompressionStream('gzip') to write, the checked gzip/zstd readers of ./decompress.ts to read,
 * libsodium's SHA-256, and the CofferClient of ../sdk.ts (fetch only); the ciphertext is uploaded as one Blob:
 * Chromium streams a request body only over HTTP/2, and the ciphertext is bounded by the server's archive limit.
 *
 * No Node built-in and no DOM-only API beyond the web platform's streams, Blob and fetch: it runs in a page and in a
 * worker.
 */
import sodium from 'libsodium-wrappers-sumo';
import type { Compression } from '../envelope-format.js';
import { CofferClient, abortError } from '../sdk.js';
import { SDK_VERSION } from '../sdk-version.js';
import type { ApiOptions, ByteStage, CofferApi, Platform, Sha256, UploadBody } from '../app/platform.js';
import { gzipStream, zstdStream } from './decompress.js';
import { ready, webPrimitives } from './primitives.js';

export { ready };

/** Browsers compress gzip only (CompressionStream has no zstd); they read both. */
function compress(compression: Compression): ByteStage {
  if (compression !== 'gzip') throw new TypeError(`a browser writes gzip backups only, not ${compression}`);
  return new CompressionStream('gzip') as unknown as ByteStage;
}

/**
 * A checked reader (./decompress.ts) as a stage: what is written to it is read through the reader. The readers are
 * functions of a stream, so the stage is an identity transform's writable side and the reader over its readable.
 */
function decompress(compression: Compression, sealedSize: number): ByteStage {
  const identity = new TransformStream<Uint8Array, Uint8Array>();
  const read = compression === 'zstd' ? zstdStream : gzipStream;
  return { writable: identity.writable, readable: read(identity.readable, sealedSize) };
}

/** libsodium's incremental SHA-256. */
function sha256(): Sha256 {
  const state = sodium.crypto_hash_sha256_init();
  return {
    update: (bytes) => sodium.crypto_hash_sha256_update(state, bytes),
    hexDigest: () => sodium.to_hex(sodium.crypto_hash_sha256_final(state)),
  };
}

/** The whole ciphertext as one Blob (its chunks are kept as they come; the Blob copies them once). */
async function collectBlob(ciphertext: ReadableStream<Uint8Array>, signal?: AbortSignal): Promise<UploadBody> {
  const reader = ciphertext.getReader();
  const parts: Uint8Array[] = [];
  const stop = () => void reader.cancel(abortError(signal)).catch(() => undefined);
  signal?.addEventListener('abort', stop, { once: true });
  try {
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
    }
  } finally {
    signal?.removeEventListener('abort', stop);
  }
  if (signal?.aborted) throw abortError(signal);
  const body = new Blob(parts as BlobPart[], { type: 'application/octet-stream' });
  return { body, contentLength: body.size };
}

/**
 * `fetch` without the User-Agent header the client sets: a browser sends its own, and one that lets a page set it
 * (Firefox) would make every request of another origin a preflighted one the API does not allow.
 */
function withoutUserAgent(inner: typeof fetch): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    headers.delete('user-agent');
    return inner(input, { ...init, headers });
  };
}

/** The browser's Platform (its primitives work once `ready` has resolved: the browser entry awaits it on load). */
export const webPlatform: Platform = {
  clientVersion: `coffer-sdk/${SDK_VERSION} browser`,
  primitives: webPrimitives,
  writeCompression: 'gzip',
  compress,
  decompress,
  sha256,
  uploadBody: collectBlob,
  api: (options: ApiOptions): CofferApi =>
    new CofferClient({
      baseUrl: options.url,
      apiKey: options.apiKey,
      requestTimeoutMs: options.timeoutMs,
      maxRetries: options.maxRetries,
      fetch: withoutUserAgent(options.fetch ?? ((input, init) => fetch(input, init))),
    }),
};
