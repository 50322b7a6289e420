/**
 * The stages of the application API's pipelines (./coffer.ts): the plan of a backup from its source (bytes, a Blob,
 * a stream, or named entries packed as tar), the application metadata checked, and the web TransformStreams that
 * count, encrypt, decrypt and check the plaintext. Platform-neutral, over a Platform's primitives.
 */
import { IntegrityError, isPlainName, type BackupMetadata } from '../envelope-format.js';
import { SecretStreamReader, SecretStreamWriter } from '../envelope-core.js';
import { packEntries, type NamedEntry, type PackedCounts } from './entries.js';
import type { Platform } from './platform.js';
import type { AppBackupMetadata, AppBackupOptions, BackupSource } from './coffer.js';

/** The largest application metadata sealed into a backup, as JSON (the sealed metadata's limit is 64 KiB). */
export const MAX_APPLICATION_METADATA_BYTES = 16 * 1024;

export interface BackupPlan {
  name: string;
  archive: 'raw' | 'tar';
  counts: PackedCounts;
  application: AppBackupMetadata['application'];
  plaintext(): ReadableStream<Uint8Array>;
}

/** @internal The application part of the sealed metadata, checked (TypeError for metadata that is no small JSON object). */
export function applicationOf(options: AppBackupOptions): AppBackupMetadata['application'] {
  if (options.hostappVersion === undefined && options.metadata === undefined) return undefined;
  if (options.metadata !== undefined) {
    const json = JSON.stringify(options.metadata);
    if (typeof json !== 'string' || !json.startsWith('{')) throw new TypeError('backup metadata must be a JSON object');
    if (new TextEncoder().encode(json).length > MAX_APPLICATION_METADATA_BYTES) {
      throw new TypeError(`backup metadata is larger than ${MAX_APPLICATION_METADATA_BYTES} bytes as JSON`);
    }
  }
  return {
    ...(options.hostappVersion !== undefined ? { hostappVersion: options.hostappVersion } : {}),
    ...(options.metadata !== undefined ? { metadata: options.metadata } : {}),
  };
}

const isEntries = (source: BackupSource): source is AsyncIterable<NamedEntry> | Iterable<NamedEntry> =>
  !(source instanceof Uint8Array) &&
  !(typeof Blob !== 'undefined' && source instanceof Blob) &&
  !(source instanceof ReadableStream) &&
  (Symbol.asyncIterator in source || Symbol.iterator in source);

/** What a source becomes: a raw stream under a plain name, or a tar stream of entries. TypeError for a bad name. */
export function planBackup(source: BackupSource, options: AppBackupOptions): BackupPlan {
  const application = applicationOf(options);
  const counts: PackedCounts = { files: 0, directories: 0 };
  if (isEntries(source)) {
    const name = options.name ?? 'entries';
    return { name, archive: 'tar', counts, application, plaintext: () => streamOf(packEntries(source, counts)) };
  }
  const fileName = typeof File !== 'undefined' && source instanceof File ? source.name : undefined;
  const name = options.name ?? fileName;
  if (!isPlainName(name)) {
    throw new TypeError('a backup of bytes or a stream needs a name of one path segment (options.name): it is the restored file');
  }
  const plaintext = (): ReadableStream<Uint8Array> =>
    source instanceof ReadableStream ? source : source instanceof Uint8Array ? streamOf([source]) : (source as Blob).stream();
  return { name, archive: 'raw', counts, application, plaintext };
}

/** `stream` as it is, with its error (if it fails) kept in `into.failure`. */
export function recordingFailure(stream: ReadableStream<Uint8Array>, into: { failure?: unknown }): ReadableStream<Uint8Array> {
  const reader = stream.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        into.failure = error;
        controller.error(error);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

/** A pull stream of an (async) iterable's chunks. */
export function streamOf(chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator =
    Symbol.asyncIterator in chunks
      ? (chunks as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]()
      : (chunks as Iterable<Uint8Array>)[Symbol.iterator]();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const next = await iterator.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      async cancel(reason) {
        await iterator.return?.(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** Counts the bytes passing (and hashes them, when given a hasher). */
export function meter(onBytes: (n: number) => void, hash?: { update(bytes: Uint8Array): void }): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream({
    transform(chunk, controller) {
      hash?.update(chunk);
      onBytes(chunk.length);
      controller.enqueue(chunk);
    },
  });
}

/** secretstream encryption (docs/crypto.md §4) as a web stream stage. */
export function encryptor(platform: Platform, dek: Uint8Array): TransformStream<Uint8Array, Uint8Array> {
  const writer = new SecretStreamWriter(platform.primitives, dek);
  return new TransformStream({
    transform: (chunk, controller) => writer.push(chunk, (bytes) => controller.enqueue(bytes)),
    flush: (controller) => writer.finish((bytes) => controller.enqueue(bytes)),
  });
}

/** secretstream decryption and authentication as a web stream stage (IntegrityError on any failure). */
export function decryptor(platform: Platform, dek: Uint8Array): TransformStream<Uint8Array, Uint8Array> {
  const reader = new SecretStreamReader(platform.primitives, dek);
  return new TransformStream({
    transform: (chunk, controller) => reader.push(chunk, (bytes) => controller.enqueue(bytes)),
    flush: (controller) => {
      try {
        reader.finish((bytes) => controller.enqueue(bytes));
      } finally {
        platform.primitives.wipe(dek);
      }
    },
  });
}

/** The plaintext against its sealed size and SHA-256: IntegrityError at the end when either differs. */
export function checker(platform: Platform, metadata: BackupMetadata): TransformStream<Uint8Array, Uint8Array> {
  const hash = platform.sha256();
  let bytes = 0;
  return new TransformStream({
    transform(chunk, controller) {
      bytes += chunk.length;
      hash.update(chunk);
      controller.enqueue(chunk);
    },
    flush() {
      if (bytes !== metadata.plaintextSizeBytes) {
        throw new IntegrityError(`the archive is ${bytes} bytes, its sealed size is ${metadata.plaintextSizeBytes}`);
      }
      if (hash.hexDigest() !== metadata.plaintextSha256) throw new IntegrityError('the archive does not match its sealed SHA-256');
    },
  });
}
