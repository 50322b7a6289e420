/**
 * The application API of the browser entry, on the Platform interface (../app/platform.ts) with the names of the
 * application facade (../app/coffer.ts: connect, writer, unlock, backup, restore, verify, list, get, watch,
 * delete). Written here because that facade was not there yet when the browser entry was built; it is the small
 * pipeline a page needs: a Blob, bytes or a stream backed up under a name as a raw archive (docs/crypto.md: one file
 * named `name`), and a backup restored to entries (a raw backup's one file, or each file of a tar), each byte checked
 * against the sealed size and SHA-256 before the entries end.
 */
import { createTarDecoder } from 'modern-tar';
import type { ApiOptions, CofferApi, Platform } from '../app/platform.js';
import {
  CRYPTO_VERSION,
  IntegrityError,
  SecretStreamReader,
  SecretStreamWriter,
  createEnvelope,
  requireRequestedBackup,
  type BackupMetadata,
} from '../envelope-core.js';
import { isPlainName } from '../envelope-format.js';
import { createKit } from '../kit-core.js';
import type { BackupDetailBody, BackupListBody, DeleteBackupResponseBody, StatusStreamFrame } from '../sdk.js';
import { SDK_VERSION } from '../sdk-version.js';

/** What a backup takes: the bytes of one file (its name is the backup's `name`). */
export type BackupSource = Blob | Uint8Array | ReadableStream<Uint8Array>;

export interface BackupOptions {
  /** The file's name in the backup (one path segment); a File's own name when not given. */
  name?: string;
  /** The host application's version, recorded with the backup (`hostappVersion`). */
  hostappVersion?: string;
  signal?: AbortSignal;
  /** Called as plaintext is read: bytes so far. */
  onProgress?: (progress: { plaintextBytes: number }) => void;
}

/** One restored file: its name in the archive and its bytes, verified by the time the entries end. */
export interface RestoredEntry {
  name: string;
  size: number;
  /** The entry's modification time, when the archive records one. */
  mtime: Date | undefined;
  stream: ReadableStream<Uint8Array>;
}

/** The vault's passphrase, or its recovery kit (`coffer kit`: the whole text, or the words alone). */
export type UnlockOptions = { passphrase: string } | { kit: string };

type Envelope = ReturnType<typeof createEnvelope<Uint8Array>>;

const toStream = (source: BackupSource): ReadableStream<Uint8Array> =>
  source instanceof ReadableStream ? source : (source instanceof Blob ? source : new Blob([source as BlobPart])).stream();

/** A transform that sees every chunk (and the end) without changing anything. */
function tap(onChunk: (chunk: Uint8Array) => void, onEnd: () => void = () => undefined): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream({
    transform(chunk, controller) {
      onChunk(chunk);
      controller.enqueue(chunk);
    },
    flush: onEnd,
  });
}

/** A session that can back up: with a recipient only (a writer), or with the unlocked master key. */
export class BackupWriter {
  constructor(
    protected readonly platform: Platform,
    protected readonly api: CofferApi,
    protected readonly envelope: Envelope,
    private readonly sealKey: (backupId: string, dek: Uint8Array) => { wrappedDek: string; wrappedDekNonce: string },
  ) {}

  /** Backs up one file's bytes under `name`; resolves with the READY backup. A failure frees the slot. */
  async backup(source: BackupSource, options: BackupOptions = {}): Promise<BackupDetailBody> {
    const name = options.name ?? (typeof File !== 'undefined' && source instanceof File ? source.name : undefined);
    if (!isPlainName(name)) throw new TypeError(`a backup needs a file name (one path segment), got ${JSON.stringify(name)}`);
    const { signal } = options;
    const { slot } = await this.api.openSlot(signal);
    if (slot.upload.protocol !== 'direct')
      throw new TypeError(`this browser client uploads by the direct protocol only, not ${slot.upload.protocol}`);
    const dek = this.envelope.newKey();
    try {
      const hash = this.platform.sha256();
      let plaintextBytes = 0;
      const writer = new SecretStreamWriter(this.platform.primitives, dek);
      const encrypt = new TransformStream<Uint8Array, Uint8Array>({
        transform: (chunk, controller) => writer.push(chunk, (sealed) => controller.enqueue(sealed)),
        flush: (controller) => writer.finish((sealed) => controller.enqueue(sealed)),
      });
      const compression = this.platform.writeCompression;
      const ciphertext = toStream(source)
        .pipeThrough(
          tap((chunk) => {
            hash.update(chunk);
            plaintextBytes += chunk.length;
            options.onProgress?.({ plaintextBytes });
          }),
        )
        .pipeThrough(this.platform.compress(compression))
        .pipeThrough(encrypt);
      const upload = await this.platform.uploadBody(ciphertext, signal);
      const uploaded = await this.api.uploadBody(slot.upload.uploadUrl, upload, { signal });
      const metadata: BackupMetadata = {
        format: 'coffer-archive/v1',
        name,
        sourcePath: '-',
        createdAt: new Date().toISOString(),
        kind: 'file',
        fileCount: 1,
        directoryCount: 0,
        symlinkCount: 0,
        archive: 'raw',
        compression,
        chunkBytes: 65536,
        plaintextSizeBytes: plaintextBytes,
        plaintextSha256: hash.hexDigest(),
        ciphertextSizeBytes: uploaded.size,
      };
      return await this.api.finalizeBackup(
        slot.backupId,
        {
          cryptoVersion: CRYPTO_VERSION,
          ...this.sealKey(slot.backupId, dek),
          ...this.envelope.sealMetadata(dek, slot.backupId, metadata),
          ciphertextSizeBytes: uploaded.size,
          plaintextSizeBytes: plaintextBytes,
          clientVersion: `coffer-sdk/${SDK_VERSION}`,
          ...(options.hostappVersion ? { hostappVersion: options.hostappVersion } : {}),
        },
        signal,
      );
    } catch (error) {
      await this.api.deleteBackup(slot.backupId).catch(() => undefined);
      throw error;
    } finally {
      this.envelope.wipe(dek);
    }
  }
}

/** An unlocked vault: backs up, restores and verifies. Call `lock()` when done (the master key is wiped). */
export class UnlockedVault extends BackupWriter {
  constructor(
    platform: Platform,
    api: CofferApi,
    envelope: Envelope,
    private readonly masterKey: Uint8Array,
  ) {
    super(platform, api, envelope, (backupId, dek) => envelope.wrapDek(masterKey, backupId, dek));
  }

  /** The files of a READY backup, streamed and checked: the iteration fails (IntegrityError) on any altered byte. */
  async *restore(id: string, options: { signal?: AbortSignal } = {}): AsyncGenerator<RestoredEntry> {
    const { metadata, plaintext } = await this.open(id, options.signal);
    if (metadata.archive === 'raw') {
      yield { name: metadata.name, size: metadata.plaintextSizeBytes, mtime: undefined, stream: plaintext };
      return;
    }
    const reader = plaintext.pipeThrough(createTarDecoder({ strict: true })).getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        const { header, body } = value;
        if ((header.type ?? 'file') !== 'file') {
          await body.cancel();
          continue;
        }
        const name = header.name
          .split('/')
          .filter((part) => part !== '' && part !== '.')
          .join('/');
        const mtime = header.mtime instanceof Date ? header.mtime : undefined;
        yield { name, size: header.size, mtime, stream: body };
      }
    } finally {
      reader.releaseLock();
    }
  }

  /** Reads a backup to its end and checks it (sizes, SHA-256, every chunk's authentication); resolves with its metadata. */
  async verify(id: string, options: { signal?: AbortSignal } = {}): Promise<BackupMetadata> {
    const { metadata, plaintext } = await this.open(id, options.signal);
    await plaintext.pipeTo(new WritableStream());
    return metadata;
  }

  /** Wipes the master key: this session can do nothing more. */
  lock(): void {
    this.envelope.wipe(this.masterKey);
  }

  /** The plaintext of a backup: decrypted, decompressed, and checked at its end against the sealed size and hash. */
  private async open(id: string, signal?: AbortSignal) {
    const detail = requireRequestedBackup(id, await this.api.getBackup(id, signal));
    if (detail.status !== 'READY') throw new TypeError(`the backup is ${detail.status}; only READY backups can be restored`);
    const { dek } = this.envelope.openDek(this.masterKey, id, detail);
    const metadata = this.envelope.openMetadata(dek, id, detail);
    const reader = new SecretStreamReader(this.platform.primitives, dek);
    const decrypt = new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, controller) => reader.push(chunk, (plain) => controller.enqueue(plain)),
      flush: (controller) => {
        reader.finish((plain) => controller.enqueue(plain));
        this.envelope.wipe(dek);
        if (reader.bytesIn !== metadata.ciphertextSizeBytes) {
          throw new IntegrityError(`the download has ${reader.bytesIn} bytes, the sealed metadata says ${metadata.ciphertextSizeBytes}`);
        }
      },
    });
    const hash = this.platform.sha256();
    let bytes = 0;
    const check = tap(
      (chunk) => {
        hash.update(chunk);
        bytes += chunk.length;
      },
      () => {
        if (bytes !== metadata.plaintextSizeBytes) {
          throw new IntegrityError(`the archive has ${bytes} bytes, the sealed metadata says ${metadata.plaintextSizeBytes}`);
        }
        if (hash.hexDigest() !== metadata.plaintextSha256) throw new IntegrityError('the archive does not match its sealed SHA-256');
      },
    );
    const content = await this.api.openContent(id, { signal });
    const plaintext = content.body
      .pipeThrough(decrypt)
      .pipeThrough(this.platform.decompress(metadata.compression, metadata.plaintextSizeBytes))
      .pipeThrough(check);
    return { metadata, plaintext };
  }
}

/** A connection to a Coffer server with an API key: the account's backups, and the sessions that read or write them. */
export class Coffer {
  private readonly envelope: Envelope;

  constructor(
    private readonly platform: Platform,
    readonly api: CofferApi,
  ) {
    this.envelope = createEnvelope(platform.primitives);
  }

  list(signal?: AbortSignal): Promise<BackupListBody> {
    return this.api.listBackups(signal);
  }

  get(id: string, signal?: AbortSignal): Promise<BackupDetailBody> {
    return this.api.getBackup(id, signal);
  }

  delete(id: string, signal?: AbortSignal): Promise<DeleteBackupResponseBody> {
    return this.api.deleteBackup(id, signal);
  }

  /** The backup's status events as they come, until the server closes the stream. */
  watch(id: string, signal?: AbortSignal): AsyncGenerator<StatusStreamFrame> {
    return this.api.statusEvents(id, signal);
  }

  /** A write-only session: backs up to the vault's recipient (`coffer recipient`), and can never restore. */
  writer(recipient: string): BackupWriter {
    const parsed = this.envelope.parseRecipient(recipient);
    return new BackupWriter(this.platform, this.api, this.envelope, (backupId, dek) => this.envelope.sealDek(parsed, backupId, dek));
  }

  /**
   * Unlocks the vault with its passphrase (Argon2id in WebAssembly: a second or two) or its recovery kit (read
   * offline: the kit's words are the master keys).
   */
  async unlock(options: UnlockOptions, signal?: AbortSignal): Promise<UnlockedVault> {
    if ('kit' in options) {
      const { material } = createKit(this.envelope).parseKitOrWords(options.kit);
      return new UnlockedVault(this.platform, this.api, this.envelope, material);
    }
    const account = await this.api.getAccount(signal);
    if (!account.initialized) throw new TypeError('this account has no vault yet: run `coffer init` first');
    const masterKey = await this.envelope.unwrapMasterKey(account, options.passphrase);
    return new UnlockedVault(this.platform, this.api, this.envelope, masterKey);
  }
}

/** Connects to a server on `platform` (the browser entry binds its own). */
export function connectOn(platform: Platform, options: ApiOptions): Coffer {
  return new Coffer(platform, platform.api(options));
}
