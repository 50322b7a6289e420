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

// libsodium initializes its WebAssembly with a top-level await: imported statically, it would hold up this module,
// and a message arriving meanwhile would find no handler. So the handler is installed first and the crypto loaded
// on demand.
const crypto = import('./crypto/envelope.js');

declare const self: DedicatedWorkerGlobalScope;

const post = (message: RestoreMessage, transfer: Transferable[] = []) => self.postMessage(message, transfer);

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

async function restore({ backupId, passphrase }: RestoreRequest): Promise<void> {
  const {
    IntegrityError,
    SecretStreamReader,
    Sha256,
    keyFingerprints,
    keyUse,
    openDek,
    openMetadata,
    ready,
    requireRequestedBackup,
    unwrapMasterKey,
    wipe,
  } = await crypto;
  await ready;
  post({ type: 'stage', stage: 'unlocking' });
  const [account, detail] = await Promise.all([
    getJson<VaultFields & { initialized: boolean }>('/api/backup-account'),
    getJson<Detail>(`/api/backups/${encodeURIComponent(backupId)}`),
  ]);
  requireRequestedBackup(backupId, detail);
  if (!account.initialized) throw new IntegrityError('this account has no vault: nothing can be decrypted');
  if (detail.status !== 'READY') throw new Error(`the backup is ${detail.status}; only READY backups can be restored`);

  const masterKey = await unwrapMasterKey(account, passphrase);
  let dek: Uint8Array | undefined;
  let metadata: BackupMetadata;
  try {
    const opened = openDek(masterKey, backupId, detail);
    dek = opened.dek;
    metadata = openMetadata(dek, backupId, detail);
    const fingerprints = keyFingerprints(masterKey);
    post({ type: 'key', use: keyUse(opened.form, opened.keyIndex, fingerprints), fingerprints });
  } finally {
    wipe(masterKey);
  }
  post({ type: 'metadata', metadata });

  try {
    post({ type: 'stage', stage: 'downloading' });
    const response = await fetch(`/api/backups/${encodeURIComponent(backupId)}/content`, { credentials: 'same-origin' });
    if (!response.ok || !response.body) throw new Error(`the download failed (${response.status})`);
    const total = metadata.ciphertextSizeBytes;

    // A failure of the download itself, told apart from one of the decompression (which is the archive's).
    let downloadFailed: unknown;
    const body = response.body.getReader();
    const download = new ReadableStream<Uint8Array>({
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
    const reader = new SecretStreamReader(dek);
    const decrypted = download.pipeThrough(
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
    const plain = (metadata.compression === 'zstd' ? zstdStream : gzipStream)(decrypted, metadata.plaintextSizeBytes);
    // A tar is indexed on a second branch while the first is hashed; the index is handed over only once verified.
    const [tar, forIndex] = metadata.archive === 'tar' ? plain.tee() : [plain, undefined];
    const indexing: Promise<ArchiveEntry[]> = forIndex ? indexTar(forIndex) : Promise.resolve(rawEntries(metadata));
    indexing.catch(() => undefined);

    const hash = new Sha256();
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
      if (error instanceof IntegrityError || error === downloadFailed) throw error;
      // After authentication, a stream that does not decompress (DecompressionStream's TypeError, fzstd's error) is tampering.
      throw new IntegrityError(
        `the decrypted archive is not valid ${metadata.compression}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    if (reader.bytesIn !== total) {
      throw new IntegrityError(`the download has ${reader.bytesIn} bytes, the sealed metadata says ${total}`);
    }
    if (size !== metadata.plaintextSizeBytes) {
      throw new IntegrityError(`the archive has ${size} bytes, the sealed metadata says ${metadata.plaintextSizeBytes}`);
    }
    if (hash.hex() !== metadata.plaintextSha256) throw new IntegrityError('the archive does not match its sealed SHA-256');
    const entries = await indexing.catch((error: unknown) => {
      throw new IntegrityError(`the verified archive is not a readable tar: ${error instanceof Error ? error.message : String(error)}`);
    });
    const blob = new Blob(parts as BlobPart[], { type: metadata.archive === 'tar' ? 'application/x-tar' : 'application/octet-stream' });
    post({ type: 'done', blob, metadata, bytes: size, entries });
  } finally {
    wipe(dek);
  }
}

self.onmessage = (event: MessageEvent<RestoreRequest>) => {
  restore(event.data).catch(async (error: unknown) => {
    const { IntegrityError, WrongPassphraseError } = await crypto;
    const integrity = error instanceof IntegrityError;
    const message = error instanceof Error ? error.message : String(error);
    post({ type: 'error', integrity, wrongPassphrase: error instanceof WrongPassphraseError, message });
  });
};
