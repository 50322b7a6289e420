/**
 * A backup's ciphertext uploaded straight to the store under presigned URLs (the `s3-presigned-upload` extension,
 * docs/upload-protocols.md): the stream, of unknown length, is cut into parts of PART_BYTES, each signed by Coffer for
 * its exact size and PUT to the store, PARTS_IN_FLIGHT at a time; Coffer then completes the upload and checks the
 * stored size. A stream that ends within the first part is one signed PUT instead. Memory stays bounded: at most
 * PARTS_IN_FLIGHT parts are held while sent and one more while read, as the encryptor's own buffers (no copy).
 *
 * A part that fails to move (a broken connection, a stall, a 5xx, an expired URL's 403) is signed again and sent
 * again, MAX_PART_ATTEMPTS times at most; Coffer's refusals (413 quota or limit, 409 state) are thrown as they are.
 * A store that cannot be reached at all before any part was accepted hands the bytes read so far and the rest of the
 * stream back to the caller (`fallback`), which sends them the server's way; anything else aborts the upload
 * (best effort: `s3-presigned.abort`) and is thrown.
 */
import type { CofferClient } from './sdk.js';
import { CofferNetworkError } from './errors.js';
import { pause } from './network-failure.js';
import { StoreRefusalError, StoreUnreachableError, type SignedRequest } from './presigned.js';
import { putToStore } from './sdk-node-upload.js';

/**
 * A part's size. Every part is held whole (a part sent again is sent from memory), so PARTS_IN_FLIGHT + 1 of them
 * (36 MiB) are what the store's way adds to a backup's memory (P9); fewer, larger parts cost fewer signings and
 * sendings: on Ceph, 50 MB went at 0.85× an AWS SDK PutObject's speed with 12 MiB parts, 0.65× with 6 or 8 MiB (P1-S3).
 */
export const PART_BYTES = 12 * 1024 * 1024;
/** Parts sent at once (while the next one is read): one part's answer and the next signing overlap a part's sending. */
export const PARTS_IN_FLIGHT = 2;
/** The largest part this client holds in memory, whatever the server asks for. */
const MAX_CLIENT_PART_BYTES = 64 * 1024 * 1024;
/** Sendings of one part (each with a new signature) before its failure is the upload's. */
export const MAX_PART_ATTEMPTS = 5;
/** Sendings of `s3-presigned.complete` after a broken connection (the server answers a repeated one the same). */
const COMPLETE_ATTEMPTS = 3;
/** How long the best-effort abort of a failed upload may take. */
const ABORT_TIMEOUT_MS = 3000;

export type PresignedOutcome =
  | { uploaded: true; size: number }
  /** The store could not be reached: nothing of this upload is stored; `rest` is the whole stream, from its start. */
  | { uploaded: false; reason: StoreUnreachableError; rest: AsyncIterable<Buffer> };

interface Part {
  chunks: Buffer[];
  bytes: number;
}

/** Cuts a stream into parts: each `fill` adds to a part up to a size, splitting a chunk (no copy) at the boundary. */
class PartReader {
  private leftover: Buffer | undefined;
  ended = false;

  constructor(private readonly source: AsyncIterator<Buffer>) {}

  async fill(part: Part, size: number): Promise<void> {
    while (part.bytes < size && !this.ended) {
      let chunk = this.leftover;
      this.leftover = undefined;
      if (!chunk) {
        const next = await this.source.next();
        if (next.done) {
          this.ended = true;
          return;
        }
        chunk = next.value;
      }
      const room = size - part.bytes;
      if (chunk.length > room) {
        this.leftover = chunk.subarray(room);
        chunk = chunk.subarray(0, room);
      }
      part.chunks.push(chunk);
      part.bytes += chunk.length;
    }
  }

  /** The parts `held`, then what the stream has not given yet. */
  async *rest(held: readonly Part[]): AsyncGenerator<Buffer> {
    for (const part of held) yield* part.chunks;
    if (this.leftover) yield this.leftover;
    this.leftover = undefined;
    while (!this.ended) {
      const next = await this.source.next();
      if (next.done) this.ended = true;
      else yield next.value;
    }
  }
}

/** The pause before sending a part again (attempt counts from 1). */
const backoffMs = (attempt: number) => Math.min(4000, 250 * 2 ** (attempt - 1));

/**
 * Whether a failed sending of a part (or of its signing) may be tried again: the store's transient answers and an
 * expired URL's 403, a connection that broke or stalled, a signing whose connection broke. Not a Coffer refusal, not
 * an answer that makes no sense (PresignedAnswerError, StoreAnswerError: the same question would get the same answer).
 */
function retryable(error: unknown): boolean {
  if (error instanceof StoreRefusalError) return [403, 408, 429, 500, 502, 503, 504].includes(error.status);
  return error instanceof StoreUnreachableError || (error instanceof CofferNetworkError && error.constructor === CofferNetworkError);
}

export interface PresignedUploadOptions {
  signal?: AbortSignal;
  /** The archive limit: the part size grows so that an archive of this size fits in the parts the server allows. */
  maxBytes: number;
}

/** Uploads `source` into the slot `backupId` through the store (see the file's comment). */
export async function uploadPresigned(
  client: CofferClient,
  backupId: string,
  source: AsyncIterable<Buffer>,
  options: PresignedUploadOptions,
): Promise<PresignedOutcome> {
  const reader = new PartReader(source[Symbol.asyncIterator]());
  const first: Part = { chunks: [], bytes: 0 };
  await reader.fill(first, PART_BYTES);
  if (reader.ended) return uploadWhole(client, backupId, reader, first, options.signal);
  // Handed over in an array that uploadParts empties: a parameter would hold the first part for the whole upload.
  return uploadParts(client, backupId, reader, [first], options);
}

/** Aborts an upload, best effort: its object and parts go, its reservation is released (the sweeper would do it later). */
async function abandon(client: CofferClient, upload: { backupId: string; uploadKey: string; uploadId?: string }): Promise<void> {
  await client.presignAbort(upload, AbortSignal.timeout(ABORT_TIMEOUT_MS)).catch(() => undefined);
}

/** `s3-presigned.complete`, sent again when its connection broke (the server answers a repeated one the same). */
async function complete(
  client: CofferClient,
  upload: { backupId: string; uploadKey: string; uploadId?: string; parts?: { partNumber: number; etag: string }[] },
  size: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.presignComplete(upload, size, signal);
      return;
    } catch (error) {
      if (!retryable(error) || error instanceof StoreRefusalError || attempt >= COMPLETE_ATTEMPTS || signal?.aborted) throw error;
      await pause(backoffMs(attempt), signal);
    }
  }
}

/** A stream that ended within the first part: one signed PUT of its exact size. */
async function uploadWhole(
  client: CofferClient,
  backupId: string,
  reader: PartReader,
  whole: Part,
  signal: AbortSignal | undefined,
): Promise<PresignedOutcome> {
  for (let attempt = 1; ; attempt++) {
    const started = await client.presignStart(backupId, whole.bytes, signal);
    if (started.mode !== 'single') throw new CofferNetworkError('the server answered a sized s3-presigned.start with a multipart upload');
    const upload = { backupId, uploadKey: started.uploadKey };
    try {
      await putToStore(client, started.request, whole.chunks, { signal });
    } catch (error) {
      await abandon(client, upload);
      if (signal?.aborted) throw error;
      if (error instanceof StoreUnreachableError) return { uploaded: false, reason: error, rest: reader.rest([whole]) };
      if (!retryable(error) || attempt >= MAX_PART_ATTEMPTS) throw error;
      await pause(backoffMs(attempt), signal);
      continue;
    }
    try {
      await complete(client, upload, whole.bytes, signal);
    } catch (error) {
      await abandon(client, upload);
      throw error;
    }
    return { uploaded: true, size: whole.bytes };
  }
}

/** A stream of more than one part: a multipart upload, PARTS_IN_FLIGHT parts at a time. */
async function uploadParts(
  client: CofferClient,
  backupId: string,
  reader: PartReader,
  firstOne: Part[],
  options: PresignedUploadOptions,
): Promise<PresignedOutcome> {
  const { signal } = options;
  const started = await client.presignStart(backupId, undefined, signal);
  if (started.mode !== 'multipart') throw new CofferNetworkError('the server answered an unsized s3-presigned.start with a single PUT');
  const upload = { backupId, uploadKey: started.uploadKey, uploadId: started.uploadId };
  const stop = new AbortController();
  const partSignal = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
  const etags = new Map<number, string>();
  const inFlight = new Set<Promise<void>>();
  /** The parts sent while none was accepted: the bytes a fallback sends the server's way. */
  let held: Part[] = [];
  let failure: unknown;
  let total = 0;

  /**
   * Each part is signed for a whole part's size as soon as its first byte is read, so that the signing overlaps its
   * reading instead of delaying its sending. A part that ends shorter (the last) is signed again for its size before
   * it is sent (the server then counts that one); an early signing that failed (a refusal of the whole part's size
   * near the quota, a broken connection) is simply done again for the real size, whose answer stands.
   */
  const early = new Map<number, Promise<SignedRequest | undefined>>();
  const signEarly = (partNumber: number, size: number) =>
    early.set(
      partNumber,
      client.presignPart(upload, partNumber, size, partSignal).catch(() => undefined),
    );
  const earlyRequest = async (partNumber: number, size: number): Promise<SignedRequest | undefined> => {
    const signed = early.get(partNumber);
    early.delete(partNumber);
    // Awaited even when unusable: a late answer must not follow (and replace) the signing of the real size.
    const request = await signed;
    return request && request.headers['content-length'] === String(size) ? request : undefined;
  };

  const sendPart = async (partNumber: number, part: Part): Promise<string> => {
    for (let attempt = 1; ; attempt++) {
      try {
        const request: SignedRequest =
          (attempt === 1 ? await earlyRequest(partNumber, part.bytes) : undefined) ??
          (await client.presignPart(upload, partNumber, part.bytes, partSignal));
        const etag = await putToStore(client, request, part.chunks, { partNumber, signal: partSignal });
        return etag!;
      } catch (error) {
        if (partSignal.aborted) throw error;
        // A store not reached at all before anything was accepted: the caller goes the server's way instead.
        if (error instanceof StoreUnreachableError && etags.size === 0) throw error;
        if (!retryable(error) || attempt >= MAX_PART_ATTEMPTS) throw error;
        await pause(backoffMs(attempt), partSignal);
      }
    }
  };

  try {
    const partSize = Math.max(PART_BYTES, started.minPartBytes, Math.ceil(options.maxBytes / started.maxParts));
    if (partSize > MAX_CLIENT_PART_BYTES) {
      throw new CofferNetworkError(
        `the server asks for parts of ${partSize} bytes for this upload; this client sends parts of at most ${MAX_CLIENT_PART_BYTES}`,
      );
    }
    let part = firstOne.pop()!;
    signEarly(1, partSize);
    await reader.fill(part, partSize);
    for (let partNumber = 1; ; partNumber++) {
      if (partNumber > started.maxParts)
        throw new CofferNetworkError(`the upload needs more than the ${started.maxParts} parts the server allows`);
      total += part.bytes;
      if (etags.size === 0) held.push(part);
      const sent = part;
      const task: Promise<void> = sendPart(partNumber, sent)
        .then(
          (etag) => {
            etags.set(partNumber, etag);
            held = [];
          },
          (error: unknown) => {
            failure ??= error;
            stop.abort();
          },
        )
        .finally(() => inFlight.delete(task));
      inFlight.add(task);
      while (inFlight.size >= PARTS_IN_FLIGHT && failure === undefined) await Promise.race(inFlight);
      if (failure !== undefined || reader.ended) break;
      part = { chunks: [], bytes: 0 };
      await reader.fill(part, 1);
      // A stream that ends on a part's boundary leaves an empty part: it is neither signed nor sent.
      if (part.bytes === 0) break;
      signEarly(partNumber + 1, partSize);
      await reader.fill(part, partSize);
    }
    while (inFlight.size > 0) await Promise.race(inFlight);
    if (failure !== undefined) throw failure;
    const parts = [...etags].sort(([a], [b]) => a - b).map(([partNumber, etag]) => ({ partNumber, etag }));
    await complete(client, { ...upload, parts }, total, signal);
    return { uploaded: true, size: total };
  } catch (error) {
    stop.abort();
    await Promise.allSettled([...inFlight, ...early.values()]);
    await abandon(client, upload);
    if (error instanceof StoreUnreachableError && etags.size === 0 && !signal?.aborted) {
      return { uploaded: false, reason: error, rest: reader.rest(held) };
    }
    throw error;
  }
}
