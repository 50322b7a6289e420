/**
 * The slot of a backup and its upload: a slot opened (or a stuck one reused or replaced), and the input streamed
 * through the compressor and the encryptor into it by the slot's protocol, held to the archive limit.
 */
import { pipeline, Readable } from 'node:stream';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Meter } from './archive.js';
import { compressor } from './compression.js';
import { EncryptStream } from './envelope.js';
import { CofferApiError, CofferNetworkError, UploadTooLargeError, type CofferClient } from './sdk.js';
import { probeUploadRefusal, putToBlobHost, uploadDirect, type ProbeTarget } from './sdk-node-upload.js';
import { uploadPresigned } from './presigned-upload.js';
import { HostWithoutVaultError } from './vault.js';
import type { BackupEvent, BackupRun } from './backup.js';
import type { BackupInput } from './backup-input.js';
import { tooLarge, type ArchiveLimit } from './archive-limit.js';

export interface Slot {
  backupId: string;
  upload: { protocol: 'direct'; url: string } | { protocol: 'blobhost-client'; handleUploadUrl: string; blobPath: string };
  /** The server's archive limit, when its create answer announced one (a reused slot has none). */
  maxArchiveBytes: number | undefined;
  /** The create answer offered the upload straight to the store (`s3-presigned-upload`; a reused slot has none). */
  presigned?: boolean;
}

/**
 * A slot to upload into. On 409 `upload_in_progress` the slot named in details.backupId is reused when it is
 * still PENDING_UPLOAD (nothing was stored in it), or deleted and replaced when it is UPLOADED (its data key
 * died with the client that uploaded it, so it can never be finalized).
 */
export async function acquireSlot(
  client: CofferClient,
  signal: AbortSignal | undefined,
  emit: (e: BackupEvent) => void,
  sealed: boolean,
): Promise<Slot> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const {
        slot: created,
        maxArchiveBytes,
        presignedUpload,
      } = await client.openSlot(signal).catch((error: unknown) => {
        // A host sealing to a recipient never initializes a vault: no vault means the key's account is the wrong one.
        if (sealed && error instanceof CofferApiError && error.code === 'vault_not_initialized') throw new HostWithoutVaultError();
        throw error;
      });
      emit({ type: 'slot', backupId: created.backupId, reused: false });
      const { upload } = created;
      return {
        maxArchiveBytes,
        presigned: presignedUpload,
        backupId: created.backupId,
        upload:
          upload.protocol === 'direct'
            ? { protocol: 'direct', url: client.directUploadUrl(created.backupId, upload.uploadUrl) }
            : { protocol: 'blobhost-client', handleUploadUrl: upload.handleUploadUrl, blobPath: created.blobPath },
      };
    } catch (error) {
      if (!(error instanceof CofferApiError) || error.code !== 'upload_in_progress') throw error;
      const otherId = error.details?.backupId;
      if (typeof otherId !== 'string') throw error;
      const other = await client.getBackup(otherId, signal).catch((e: unknown) => {
        if (e instanceof CofferApiError && e.status === 404) return undefined;
        throw e;
      });
      if (other?.status === 'PENDING_UPLOAD') {
        // Its blobPath is not part of BackupDetail, so a reused slot is filled with a direct upload (which a
        // Coffer server in blobhost-client mode accepts as well).
        emit({ type: 'slot', backupId: otherId, reused: true });
        return { backupId: otherId, upload: { protocol: 'direct', url: client.directUploadUrl(otherId) }, maxArchiveBytes: undefined };
      }
      if (other) {
        await client.deleteBackup(otherId, signal).catch((e: unknown) => {
          if (!(e instanceof CofferApiError && e.status === 404)) throw e;
        });
        emit({ type: 'replaced', backupId: otherId });
      }
    }
  }
  throw new Error('could not obtain an upload slot: another upload keeps taking it');
}

/** How much plaintext a backup reads between two collections of V8's young generation (youngCollector). */
const COLLECT_EVERY = 4 * 1024 * 1024;

/**
 * A minor garbage collection (a scavenge of V8's young generation), run by the upload every COLLECT_EVERY bytes of
 * plaintext. The compressor's and the encryptor's 1 MiB output buffers die young, but V8 scavenges only when its
 * young generation fills, many of them later, and the memory they held stays resident: collecting as they go keeps
 * a backup's peak memory to its pipeline, for no measurable CPU (P9 in BENCHMARKS.md). A process reaches V8's gc()
 * only through a context made while --expose-gc is on: the flag is on for that one context, so the program's own
 * global scope never has a gc. Undefined where the runtime does not allow it.
 */
function youngCollector(): (() => void) | undefined {
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('typeof gc === "function" ? gc : undefined') as ((options: { type: 'minor' }) => void) | undefined;
    if (!gc) return undefined;
    let usable = true;
    // A runtime whose gc() refuses the options is left to collect on its own.
    return () => {
      if (!usable) return;
      try {
        gc({ type: 'minor' });
      } catch {
        usable = false;
      }
    };
  } catch {
    return undefined;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

/** What the upload counted: the plaintext read and the ciphertext sent (each with its SHA-256 when hashed). */
export interface Uploaded {
  plain: Meter;
  cipher: Meter;
}

/**
 * Streams input → compressor → secretstream into the slot by its protocol (a direct upload to the server, or the
 * blob host with a client token), held to `limit`. A refusal over the limit, or a broken connection that a probe
 * shows was one, is an ArchiveTooLargeError.
 */
export async function upload(run: BackupRun, slot: Slot, limit: ArchiveLimit, input: BackupInput, dek: Buffer): Promise<Uploaded> {
  const { options, emit, compression, gzipLevel } = run;
  const { client, signal } = options;
  let ciphertextBytes = 0;
  const progress = () =>
    emit({
      type: 'progress',
      plaintextBytes: plain.bytes,
      ciphertextBytes,
      estimatedPlaintextBytes: Math.max(input.scan?.tarBoundBytes ?? 0, plain.bytes),
    });
  const collect = youngCollector();
  let collectAt = COLLECT_EVERY;
  const plain = new Meter({
    hash: true,
    onBytes: (total) => {
      if (collect && total >= collectAt) {
        collectAt = total + COLLECT_EVERY;
        collect();
      }
      progress();
    },
  });
  const cipher = new Meter({
    // Only a chain link names the ciphertext's SHA-256: without one, no hash on the backup path.
    hash: options.chain !== undefined,
    limit: limit.bytes,
    onBytes: (total) => {
      ciphertextBytes = total;
    },
    onLimit: (seen) => tooLarge(limit, seen, 'during-upload'),
  });
  let pipeError: Error | null = null;
  const release = (chunk: Buffer) => input.pool.release(chunk);
  pipeline(input.read(), plain, compressor(compression, gzipLevel, release), new EncryptStream(dek), cipher, (error) => {
    pipeError = error ?? null;
  });
  let probeTarget: ProbeTarget | undefined;
  try {
    // The store itself where the server offers it; the server's way for a store it cannot reach (once).
    let body: Readable = cipher;
    let direct = slot.upload.protocol === 'direct' ? slot.upload : undefined;
    if (slot.presigned) {
      const outcome = await uploadPresigned(client, slot.backupId, cipher, { signal, maxBytes: limit.bytes });
      if (outcome.uploaded) {
        if (outcome.size !== cipher.bytes) throw new Error(`the store holds ${outcome.size} bytes but ${cipher.bytes} were sent`);
        return { plain, cipher };
      }
      emit({ type: 'store-unreachable', reason: outcome.reason.message });
      body = Readable.from(outcome.rest, { objectMode: false });
      direct = { protocol: 'direct', url: client.directUploadUrl(slot.backupId) };
    }
    if (direct) {
      probeTarget = direct;
      const uploaded = await uploadDirect(client, direct.url, body, { signal });
      if (uploaded.size !== cipher.bytes) {
        throw new Error(`the server stored ${uploaded.size} bytes but ${cipher.bytes} were sent`);
      }
    } else if (slot.upload.protocol === 'blobhost-client') {
      const { handleUploadUrl, blobPath } = slot.upload;
      const clientToken = await client.negotiateBlobUpload(handleUploadUrl, blobPath, signal);
      probeTarget = { protocol: 'blobhost-client', clientToken, blobPath };
      await putToBlobHost(client, clientToken, blobPath, cipher, { signal });
    }
  } catch (error) {
    if (error instanceof UploadTooLargeError) {
      const max = error.maxBytes ?? limit.bytes;
      throw tooLarge({ bytes: max, source: 'server' }, Math.max(cipher.bytes, max + 1), 'during-upload');
    }
    if (error instanceof CofferNetworkError && probeTarget && cipher.bytes > 0 && !signal?.aborted) {
      // The connection broke with no answer: was it a cut-off (size, quota) whose 413 the TCP reset swallowed?
      const refusal = await probeUploadRefusal(client, probeTarget, cipher.bytes);
      if (refusal instanceof UploadTooLargeError && refusal.maxBytes !== undefined && cipher.bytes > refusal.maxBytes) {
        throw tooLarge({ bytes: refusal.maxBytes, source: 'server' }, cipher.bytes, 'during-upload');
      }
      if (refusal && !(refusal instanceof UploadTooLargeError)) throw refusal;
    }
    // The server's answer (or the broken connection) is what happened; the pipeline's own error only when it broke
    // first (a source that cannot be read): a refusal mid-stream also ends the pipeline, with "Premature close".
    throw error instanceof CofferApiError || error instanceof CofferNetworkError || !pipeError ? error : pipeError;
  }
  return { plain, cipher };
}
