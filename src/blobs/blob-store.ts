/** Ciphertext storage: one interface, one implementation per backend (filesystem embedded, S3 scale-out). */
import type { Readable } from 'node:stream';

export interface ByteRange {
  /** First byte, inclusive. */
  start: number;
  /** Last byte, inclusive. */
  end: number;
}

export interface BlobStore {
  readonly kind: 'fs' | 's3';
  /**
   * Streams `body` into `key`. The blob becomes visible only once the whole body is stored durably;
   * when `body` fails or `signal` aborts, nothing is left behind and the error is rethrown.
   */
  put(key: string, body: Readable, signal?: AbortSignal): Promise<{ size: number }>;
  /** Size in bytes, or null when the blob does not exist. */
  stat(key: string): Promise<{ size: number } | null>;
  /** Streams the blob, or the inclusive byte range of it. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** Removes the blob; removing a missing blob is not an error. */
  delete(key: string): Promise<void>;
  /** Every stored key (for orphan sweeping). */
  list(): AsyncIterable<string>;
  /** Reachability probe for readiness checks. */
  ping(): Promise<void>;
}
