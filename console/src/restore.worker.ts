/**
 * Restore in the browser, off the main thread: download the ciphertext with the session, unlock the vault with
 * the passphrase (Argon2id in WebAssembly), decrypt (gzip or zstd, as the sealed metadata says) and verify, and hand
 * back the archive (.tar, or the one file of a raw backup) as a Blob, with the index of its entries.
 * The passphrase and the plaintext stay in this worker and the page; nothing is sent anywhere.
 */
/// <reference lib="webworker" />
import { gzipStream, zstdStream } from '../../src/client/web/decompress.js';
import { indexTar, rawEntries, type ArchiveEntry } from './archive-index.js';
import type { BackupMetadata, VaultFields } from './crypto/envelope.js';
import type { RestoreRequest, RestoreMessage } from './restore-protocol.js';
import type { BackupDetailBody } from '../../src/contract/schemas.js';
import type { AttestationListBody } from '../../src/contract/attestation.js';
import { isRecord, verifyEach } from './drill-check.js';

// libsodium initializes its WebAssembly with a top-level await: imported statically, it would hold up this module,
// and a message arriving meanwhile would find no handler. So the handler is installed first and the crypto loaded
// on demand.
const crypto = import('./crypto/envelope.js');
type Crypto = Awaited<typeof crypto>;

declare const self: DedicatedWorkerGlobalScope;

const post = (message: RestoreMessage, transfer: Transferable[] = []) => self.postMessage(message, transfer);

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(path, { credentials: 'same-origin', headers: { accept: 'application/json' } });
  if (!response.ok) {
    const body = (await response.json().catch(() => null)) as { message?: string } | null;
    throw new Error(body?.message ?? `the server answered ${response.status}`);
  }
  return (await response.json()) as T;
}

type Detail = Pick<
  BackupDetailBody,
  'id' | 'status' | 'ciphertextSizeBytes' | 'wrappedDek' | 'wrappedDekNonce' | 'encryptedMetadata' | 'encryptedMetadataNonce'
>;

/** The backup's drill attestations as the server shows them; null when they cannot be read (the restore goes on). */
async function drillAttestations(backupId: string): Promise<AttestationListBody['attestations'] | null> {
  try {
    const { attestations } = await getJson<AttestationListBody>(`/api/backups/${encodeURIComponent(backupId)}/attestations`);
    return Array.isArray(attestations) ? attestations.filter((entry) => isRecord(entry) && entry.backupId === backupId) : null;
  } catch {
    return null;
  }
}

/** Unlocks the vault with the passphrase and opens the backup's data key and sealed metadata (the master key wiped). */
async function openBackup(c: Crypto, { backupId, passphrase }: RestoreRequest): Promise<{ dek: Uint8Array; metadata: BackupMetadata }> {
  post({ type: 'stage', stage: 'unlocking' });
  const [account, detail, attestations] = await Promise.all([
    getJson<VaultFields & { initialized: boolean }>('/api/backup-account'),
    getJson<Detail>(`/api/backups/${encodeURIComponent(backupId)}`),
    drillAttestations(backupId),
  ]);
  c.requireRequestedBackup(backupId, detail);
  if (!account.initialized) throw new c.IntegrityError('this account has no vault: nothing can be decrypted');
  if (detail.status !== 'READY') throw new Error(`the backup is ${detail.status}; only READY backups can be restored`);

  const masterKey = await c.unwrapMasterKey(account, passphrase);
  try {
    const opened = c.openDek(masterKey, backupId, detail);
    const metadata = c.openMetadata(opened.dek, backupId, detail);
    const fingerprints = c.keyFingerprints(masterKey);
    post({ type: 'key', use: c.keyUse(opened.form, opened.keyIndex, fingerprints), fingerprints });
    if (attestations) post({ type: 'drills', verdicts: verifyEach(c, masterKey, attestations) });
    return { dek: opened.dek, metadata };
  } finally {
    c.wipe(masterKey);
  }
}

/** The ciphertext as it downloads; `failure()` is the download's own error, told apart from one of the decompression. */
async function download(backupId: string): Promise<{ stream: ReadableStream<Uint8Array>; failure: () => unknown }> {
  const response = await fetch(`/api/backups/${encodeURIComponent(backupId)}/content`, { credentials: 'same-origin' });
  if (!response.ok || !response.body) throw new Error(`the download failed (${response.status})`);
  let downloadFailed: unknown;
  const body = response.body.getReader();
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await body.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        downloadFailed = error;
        throw error;
      }
    },
    cancel: (reason) => body.cancel(reason),
  });
  return { stream, failure: () => downloadFailed };
}

/** Decrypts the download as it arrives (reporting progress against the sealed size). */
function decrypt(stream: ReadableStream<Uint8Array>, reader: InstanceType<Crypto['SecretStreamReader']>, total: number) {
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        reader.push(chunk, (plain) => controller.enqueue(plain));
        post({ type: 'progress', done: reader.bytesIn, total });
      },
      flush(controller) {
        reader.finish((plain) => controller.enqueue(plain));
      },
    }),
  );
}

/** Reads the whole archive, hashing it; a stream that does not decompress after authentication is tampering. */
async function readArchive(c: Crypto, tar: ReadableStream<Uint8Array>, metadata: BackupMetadata, downloadFailure: () => unknown) {
  const hash = new c.Sha256();
  const parts: Uint8Array[] = [];
  let size = 0;
  const consume = tar.getReader();
  try {
    for (;;) {
      const { done, value } = await consume.read();
      if (done) break;
      hash.update(value);
      parts.push(value);
      size += value.length;
    }
  } catch (error) {
    if (error instanceof c.IntegrityError || error === downloadFailure()) throw error;
    // After authentication, a stream that does not decompress (DecompressionStream's TypeError, fzstd's error) is tampering.
    throw new c.IntegrityError(`the decrypted archive is not valid ${metadata.compression}: ${messageOf(error)}`);
  }
  return { parts, size, sha256: hash.hex() };
}

async function restore(request: RestoreRequest): Promise<void> {
  const c = await crypto;
  await c.ready;
  const { dek, metadata } = await openBackup(c, request);
  post({ type: 'metadata', metadata });

  try {
    post({ type: 'stage', stage: 'downloading' });
    const { stream, failure } = await download(request.backupId);
    const total = metadata.ciphertextSizeBytes;
    const reader = new c.SecretStreamReader(dek);
    const plain = (metadata.compression === 'zstd' ? zstdStream : gzipStream)(decrypt(stream, reader, total), metadata.plaintextSizeBytes);
    // A tar is indexed on a second branch while the first is hashed; the index is handed over only once verified.
    const [tar, forIndex] = metadata.archive === 'tar' ? plain.tee() : [plain, undefined];
    const indexing: Promise<ArchiveEntry[]> = forIndex ? indexTar(forIndex) : Promise.resolve(rawEntries(metadata));
    indexing.catch(() => undefined);

    const { parts, size, sha256 } = await readArchive(c, tar, metadata, failure);
    if (reader.bytesIn !== total) {
      throw new c.IntegrityError(`the download has ${reader.bytesIn} bytes, the sealed metadata says ${total}`);
    }
    if (size !== metadata.plaintextSizeBytes) {
      throw new c.IntegrityError(`the archive has ${size} bytes, the sealed metadata says ${metadata.plaintextSizeBytes}`);
    }
    if (sha256 !== metadata.plaintextSha256) throw new c.IntegrityError('the archive does not match its sealed SHA-256');
    const entries = await indexing.catch((error: unknown) => {
      throw new c.IntegrityError(`the verified archive is not a readable tar: ${messageOf(error)}`);
    });
    const blob = new Blob(parts as BlobPart[], { type: metadata.archive === 'tar' ? 'application/x-tar' : 'application/octet-stream' });
    post({ type: 'done', blob, metadata, bytes: size, entries });
  } finally {
    c.wipe(dek);
  }
}

self.onmessage = (event: MessageEvent<RestoreRequest>) => {
  restore(event.data).catch(async (error: unknown) => {
    const { IntegrityError, WrongPassphraseError } = await crypto;
    const integrity = error instanceof IntegrityError;
    const message = messageOf(error);
    post({ type: 'error', integrity, wrongPassphrase: error instanceof WrongPassphraseError, message });
  });
};
