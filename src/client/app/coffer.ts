/**
 * The application API of the SDK, platform-neutral: `connect` to a server, then list, get, watch and delete
 * backups; `unlock` with the passphrase or a recovery kit for a Vault that backs up, restores and verifies; or
 * `writer` with only the vault's recipient for a session that can back up and never restore. It runs on web
 * streams, fetch and the envelope core over a Platform's primitives (./platform.ts): ../node.ts binds it to Node,
 * ../browser.ts to the browser. The bytes are those of the CLI (docs/crypto.md): a backup made here restores with
 * `coffer restore`, and the other way round.
 */
import { CHUNK_BYTES, CRYPTO_VERSION, IntegrityError, type BackupMetadata } from '../envelope-format.js';
import { createEnvelope } from '../envelope-core.js';
import type { Recipient } from '../envelope-recipient.js';
import { createKit } from '../kit-core.js';
import { CofferNetworkError, VaultStateError } from '../errors.js';
import type { BackupDetailBody, BackupRecordBody, BackupStatusEventBody, DeleteBackupResponseBody } from '../sdk.js';
import { readEntries, type ArchiveEntry, type NamedEntry } from './entries.js';
import type { CofferApi, Platform } from './platform.js';
import { requireSpokenVersion } from './version.js';
import { checker, decryptor, encryptor, meter, planBackup, recordingFailure, type BackupPlan } from './pipeline.js';

export { MAX_APPLICATION_METADATA_BYTES } from './pipeline.js';

export type { ArchiveEntry, NamedEntry } from './entries.js';

/** How to reach a server. */
export interface ConnectOptions {
  /** The server's base URL, e.g. `https://backups.example.com`. */
  url: string;
  /** An API key of the account (`Authorization: Bearer`). */
  apiKey: string;
  /** The deadline of one API exchange in ms (default 120 000). */
  timeoutMs?: number;
  /** Retries of an idempotent request or a 429/503 answer (default 2); see CofferClientOptions.maxRetries. */
  maxRetries?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** The runtime's implementation (the Node and browser entries pass theirs). */
  platform: Platform;
}

/** A call's options: every call can be cancelled. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** What a backup reports while it runs. */
export interface BackupProgress {
  /** Plaintext bytes read from the source so far (tar stream or raw bytes). */
  plaintextBytes: number;
  /** Encrypted bytes produced so far. */
  ciphertextBytes: number;
}

/** Options of a backup. */
export interface AppBackupOptions extends CallOptions {
  /**
   * The backup's name (sealed, docs/crypto.md §3). Required for bytes or a stream (it is the restored file's
   * name: one path segment); a File's own name is the default for it; entries default to "entries".
   */
  name?: string;
  /** The host application's version, sent in clear to the server (`hostappVersion`) and sealed with the rest. */
  hostappVersion?: string;
  /** The application's own small metadata (JSON, at most MAX_APPLICATION_METADATA_BYTES), sealed in. */
  metadata?: Record<string, unknown>;
  /** Called as bytes move (at most once per chunk). */
  onProgress?: (progress: BackupProgress) => void;
}

/** What a backup can be made of: one blob of bytes under a name (raw), or named entries (a tar archive). */
export type BackupSource = Uint8Array | Blob | ReadableStream<Uint8Array> | AsyncIterable<NamedEntry> | Iterable<NamedEntry>;

/** The metadata sealed in an application's backup: the archive's, and the application's own. */
export interface AppBackupMetadata extends BackupMetadata {
  /** Written by the SDK's application API (docs/crypto.md §3): the host application and its own metadata. */
  application?: { hostappVersion?: string; metadata?: Record<string, unknown> };
}

/** A backup made: the server's record and what was sealed in it. */
export interface AppBackupResult {
  id: string;
  detail: BackupDetailBody;
  metadata: AppBackupMetadata;
}

/** A backup verified end to end: decrypted, decompressed and checked against its sealed size and SHA-256. */
export interface AppVerifyResult {
  id: string;
  plaintextBytes: number;
  metadata: AppBackupMetadata;
}

/** A write-only session (`Coffer.writer`) was asked to read a backup: it holds no key that could. */
export class WriteOnlySessionError extends Error {
  override readonly name = 'WriteOnlySessionError';
  constructor(what: string) {
    super(`${what} needs the vault's key: this session holds only the recipient (write-only); unlock with the passphrase or a kit`);
  }
}

/** The account has no vault yet (set one up with `coffer init` or the console). */
export class VaultNotInitializedError extends Error {
  override readonly name = 'VaultNotInitializedError';
}

/** Connects to a server. Nothing is sent until the first call; the first call checks the server's API version. */
export function connect(options: ConnectOptions): Coffer {
  return new Coffer(apiOf(options, options.platform), options.platform);
}

/** @internal The API client `platform` makes for these connect options (each entry's connect uses it). */
export function apiOf(options: Omit<ConnectOptions, 'platform'>, platform: Platform): CofferApi {
  const { url, apiKey, timeoutMs, maxRetries, fetch } = options;
  return platform.api({ url, apiKey, timeoutMs, maxRetries, fetch });
}

type Envelope = ReturnType<typeof createEnvelope<Uint8Array>>;

/** A connection to one server with one API key: the backups of its account. */
export class Coffer {
  private checked: Promise<string> | undefined;
  /** @internal */
  readonly envelope: Envelope;

  /** @internal Use connect(). */
  constructor(
    /** @internal */ readonly api: CofferApi,
    /** @internal */ readonly platform: Platform,
  ) {
    this.envelope = createEnvelope(platform.primitives);
  }

  /**
   * Checks (once) that the server speaks an API version this SDK speaks: its version, or IncompatibleServerError
   * naming both (also for a server that is no Coffer server). Every other call does this first.
   */
  checkServer(options: CallOptions = {}): Promise<string> {
    this.checked ??= this.api.apiVersion(options.signal).then((version) => requireSpokenVersion(version, this.api.baseUrl));
    // A failure to reach the server is not a verdict: the next call asks again.
    this.checked.catch((error: unknown) => {
      if (error instanceof CofferNetworkError || options.signal?.aborted) this.checked = undefined;
    });
    return this.checked;
  }

  /** The account's backups, newest first. */
  async list(options: CallOptions = {}): Promise<BackupRecordBody[]> {
    await this.checkServer(options);
    return (await this.api.listBackups(options.signal)).backups;
  }

  /** One backup's record (NotFoundError when there is none). */
  async get(id: string, options: CallOptions = {}): Promise<BackupDetailBody> {
    await this.checkServer(options);
    return this.api.getBackup(id, options.signal);
  }

  /** Deletes a backup (it stays restorable by the operator until the deletion grace ends). */
  async delete(id: string, options: CallOptions = {}): Promise<DeleteBackupResponseBody> {
    await this.checkServer(options);
    return this.api.deleteBackup(id, options.signal);
  }

  /**
   * Follows a backup's status: yields each status event until the backup reaches a final state (READY, FAILED,
   * DELETED, …), reconnecting (up to 5 times in a row) when the server closes the stream before that.
   */
  async *watch(id: string, options: CallOptions = {}): AsyncGenerator<BackupStatusEventBody> {
    await this.checkServer(options);
    for (let reconnects = 0; reconnects <= 5; reconnects++) {
      let closed: { reason?: string } | undefined;
      for await (const frame of this.api.statusEvents(id, options.signal)) {
        if (frame.event === 'backup.status') {
          reconnects = 0;
          yield frame.data as BackupStatusEventBody;
        } else if (frame.event === 'backup.stream.closed') closed = frame.data as { reason?: string };
        else if (frame.event === 'backup.stream.error') {
          const data = (frame.data ?? {}) as { error?: string };
          throw new CofferNetworkError(data.error ?? 'the event stream reported an error');
        }
      }
      if (closed?.reason === 'terminal') return;
    }
    throw new CofferNetworkError(`gave up following backup ${id}: the server kept closing the stream`);
  }

  /**
   * Sets up the account's vault, as `coffer init` does: a new master key, wrapped under `passphrase` (Argon2id with
   * the default profile), sent once; returns the vault unlocked. VaultStateError when the account already has a vault
   * (also when another client set it up at the same moment: nothing is changed then).
   */
  async init(secret: { passphrase: string }, options: CallOptions = {}): Promise<Vault> {
    await this.checkServer(options);
    const account = await this.api.getAccount(options.signal);
    if (account.initialized) throw new VaultStateError('the vault is already initialized: unlock it instead');
    const masterKey = this.envelope.newKey();
    try {
      const envelope = await this.envelope.wrapMasterKey(masterKey, secret.passphrase, this.envelope.newKdfParams());
      const result = await this.api.bootstrap(envelope, options.signal);
      if (!result.created) throw new VaultStateError('another client initialized the vault at the same time; nothing was changed');
    } catch (error) {
      this.envelope.wipe(masterKey);
      throw error;
    }
    return this.vaultOf(masterKey);
  }

  /**
   * Unlocks the vault with its passphrase (Argon2id, as the CLI) or a recovery kit's text (`coffer kit`): a Vault
   * that backs up, restores and verifies. WrongPassphraseError for a wrong passphrase.
   */
  async unlock(secret: { passphrase: string } | { kit: string }, options: CallOptions = {}): Promise<Vault> {
    await this.checkServer(options);
    const account = await this.api.getAccount(options.signal);
    if (!account.initialized) throw new VaultNotInitializedError('the vault is not initialized: set it up with `coffer init` first');
    if ('passphrase' in secret) return this.vaultOf(await this.envelope.unwrapMasterKey(account, secret.passphrase));
    return this.vaultOf(createKit(this.envelope).parseKitOrWords(secret.kit).material);
  }

  /** @internal The session of an unlocked vault (a platform's entry may return its own kind). */
  protected vaultOf(masterKey: Uint8Array): Vault {
    return new Vault(this, masterKey);
  }

  /**
   * A write-only session: backs up to the vault's recipient (`coffer recipient`, "coffer1…") and can never
   * restore; RecipientFormatError for a malformed recipient.
   */
  writer(recipient: string): WriteOnlySession {
    return new WriteOnlySession(this, this.envelope.parseRecipient(recipient));
  }

  /** The same as writer(). */
  withRecipient(recipient: string): WriteOnlySession {
    return this.writer(recipient);
  }
}

/** What seals a backup's data key: the master key (Vault) or the recipient (write-only). */
type DekSealer = (backupId: string, dek: Uint8Array) => { wrappedDek: string; wrappedDekNonce: string };

/** A session that backs up. */
abstract class BackupSession {
  constructor(
    /** @internal */ protected readonly coffer: Coffer,
    private readonly sealDek: DekSealer,
  ) {}

  /**
   * Backs up `source`: bytes, a Blob/File or a stream (one file, restored under `options.name`), or named entries
   * (a tar archive, restored as those files). Streams the source through compression and encryption to the
   * server, then finalizes. Cancelled by `options.signal`; on any failure the upload slot is freed.
   */
  async backup(source: BackupSource, options: AppBackupOptions = {}): Promise<AppBackupResult> {
    const coffer = this.coffer;
    await coffer.checkServer(options);
    const plan = planBackup(source, options);
    const opened = await coffer.api.openSlot(options.signal);
    const { slot } = opened;
    try {
      return await this.upload(opened, plan, options);
    } catch (error) {
      await coffer.api.deleteBackup(slot.backupId).catch(() => undefined);
      throw error;
    }
  }

  /** The ciphertext to the store where the server offers it and the platform can, else (or if unreachable) to the server. */
  private async send(
    opened: Awaited<ReturnType<CofferApi['openSlot']>>,
    ciphertext: ReadableStream<Uint8Array>,
    signal: AbortSignal | undefined,
  ): Promise<{ size: number }> {
    const { api, platform } = this.coffer;
    const { slot } = opened;
    let body = ciphertext;
    if (opened.presignedUpload && platform.uploadToStore) {
      const maxBytes = opened.maxArchiveBytes ?? Number.MAX_SAFE_INTEGER;
      const outcome = await platform.uploadToStore(api, slot.backupId, ciphertext, { signal, maxBytes });
      if (outcome.uploaded) return outcome;
      body = outcome.rest;
    }
    if (slot.upload.protocol !== 'direct') throw new Error('the application API uploads with "direct"');
    return api.uploadBody(slot.upload.uploadUrl, await platform.uploadBody(body, signal), { signal });
  }

  private async upload(
    opened: Awaited<ReturnType<CofferApi['openSlot']>>,
    plan: BackupPlan,
    options: AppBackupOptions,
  ): Promise<AppBackupResult> {
    const { api, platform, envelope } = this.coffer;
    const { slot } = opened;
    const upload = slot.upload;
    if (upload.protocol !== 'direct') {
      throw new Error(`the server offers the ${upload.protocol} upload protocol; the application API uploads with "direct"`);
    }
    const dek = envelope.newKey();
    try {
      const progress: BackupProgress = { plaintextBytes: 0, ciphertextBytes: 0 };
      const report = () => options.onProgress?.({ ...progress });
      const hash = platform.sha256();
      const compression = platform.writeCompression;
      const source: { failure?: unknown } = {};
      const ciphertext = recordingFailure(plan.plaintext(), source)
        .pipeThrough(
          meter((n) => ((progress.plaintextBytes += n), report()), hash),
          { signal: options.signal },
        )
        .pipeThrough(platform.compress(compression))
        .pipeThrough(encryptor(platform, dek))
        .pipeThrough(meter((n) => ((progress.ciphertextBytes += n), report())));
      // A source that fails mid-upload (a dump command that exits non-zero) breaks the request: its own error is the
      // cause to report, not the broken connection it shows up as.
      const uploaded = await this.send(opened, ciphertext, options.signal).catch((error: unknown) => {
        throw 'failure' in source && !options.signal?.aborted ? source.failure : error;
      });
      if (uploaded.size !== progress.ciphertextBytes) {
        throw new Error(`the server stored ${uploaded.size} bytes but ${progress.ciphertextBytes} were sent`);
      }
      const metadata: AppBackupMetadata = {
        format: 'coffer-archive/v1',
        name: plan.name,
        sourcePath: '-',
        createdAt: new Date().toISOString(),
        kind: plan.archive === 'raw' ? 'file' : 'directory',
        fileCount: plan.archive === 'raw' ? 1 : plan.counts.files,
        directoryCount: plan.counts.directories,
        symlinkCount: 0,
        archive: plan.archive,
        compression,
        chunkBytes: CHUNK_BYTES,
        plaintextSizeBytes: progress.plaintextBytes,
        plaintextSha256: hash.hexDigest(),
        ciphertextSizeBytes: progress.ciphertextBytes,
        ...(plan.application ? { application: plan.application } : {}),
      };
      const detail = await api.finalizeBackup(
        slot.backupId,
        {
          cryptoVersion: CRYPTO_VERSION,
          ...this.sealDek(slot.backupId, dek),
          ...envelope.sealMetadata(dek, slot.backupId, metadata),
          ciphertextSizeBytes: progress.ciphertextBytes,
          plaintextSizeBytes: progress.plaintextBytes,
          clientVersion: platform.clientVersion,
          ...(options.hostappVersion ? { hostappVersion: options.hostappVersion } : {}),
        },
        options.signal,
      );
      return { id: slot.backupId, detail, metadata };
    } finally {
      envelope.wipe(dek);
    }
  }
}

/** An unlocked vault: backs up, restores and verifies. Call close() to wipe its key when done. */
export class Vault extends BackupSession {
  /** @internal */
  constructor(
    coffer: Coffer,
    /** @internal */ protected readonly masterKey: Uint8Array,
  ) {
    super(coffer, (backupId, dek) => coffer.envelope.wrapDek(masterKey, backupId, dek));
  }

  /**
   * A backup's entries, in archive order: each with its name and a stream of its content (read it before the next;
   * one left unread is skipped). A raw backup (bytes or a stream) is one entry under its name. The whole is checked
   * against the sealed size and SHA-256 as it is read: IntegrityError from the iteration (at the latest at its end)
   * means the content must not be trusted.
   */
  async *restore(id: string, options: CallOptions = {}): AsyncGenerator<ArchiveEntry> {
    const { metadata, plaintext } = await this.open(id, options);
    if (metadata.archive === 'raw') {
      yield {
        name: metadata.name,
        type: 'file',
        size: metadata.plaintextSizeBytes,
        mtime: new Date(metadata.createdAt),
        mode: 0o644,
        stream: plaintext,
      };
      return;
    }
    // The tar stream ends at its two zero blocks: what follows is read to the end too, so that the final checks run.
    const source = plaintext[Symbol.asyncIterator]();
    const kept: AsyncIterable<Uint8Array> = { [Symbol.asyncIterator]: () => ({ next: () => source.next() }) };
    yield* readEntries(kept);
    for (let next = await source.next(); !next.done; next = await source.next());
  }

  /** Reads a whole backup and checks it (authentication, sealed size and SHA-256), keeping nothing. */
  async verify(id: string, options: CallOptions = {}): Promise<AppVerifyResult> {
    const { metadata, plaintext } = await this.open(id, options);
    let plaintextBytes = 0;
    for await (const chunk of plaintext) plaintextBytes += chunk.length;
    return { id, plaintextBytes, metadata };
  }

  /** Wipes the vault's key; the session cannot be used afterwards. */
  close(): void {
    this.coffer.envelope.wipe(this.masterKey);
  }

  /** A READY backup's sealed metadata and its checked plaintext stream. */
  private async open(id: string, options: CallOptions): Promise<{ metadata: AppBackupMetadata; plaintext: ReadableStream<Uint8Array> }> {
    const { api, platform, envelope } = this.coffer;
    await this.coffer.checkServer(options);
    const detail = await api.getBackup(id, options.signal);
    if (detail.status !== 'READY') throw new IntegrityError(`backup ${id} is ${detail.status}; only READY backups can be read`);
    const dek = envelope.unwrapDek(this.masterKey, id, detail);
    let metadata: AppBackupMetadata;
    try {
      metadata = envelope.openMetadata(dek, id, detail);
    } catch (error) {
      envelope.wipe(dek);
      throw error;
    }
    const content = await (api.openBackupContent ?? api.openContent).call(api, id, { signal: options.signal });
    const plaintext = content.body
      .pipeThrough(decryptor(platform, dek), { signal: options.signal })
      .pipeThrough(platform.decompress(metadata.compression, metadata.plaintextSizeBytes))
      .pipeThrough(checker(platform, metadata));
    return { metadata, plaintext };
  }
}

/** A write-only session: it backs up to the recipient and holds no key that could read a backup. */
export class WriteOnlySession extends BackupSession {
  /** The recipient's fingerprint (as `coffer recipient` shows it). */
  readonly fingerprint: string;

  /** @internal */
  constructor(coffer: Coffer, recipient: Recipient) {
    super(coffer, (backupId, dek) => coffer.envelope.sealDek(recipient, backupId, dek));
    this.fingerprint = recipient.fingerprint;
  }
}

// A write-only session has no restore or verify; called through a cast, they say why.
for (const what of ['restore', 'verify'] as const) {
  Object.defineProperty(WriteOnlySession.prototype, what, {
    value() {
      throw new WriteOnlySessionError(what === 'restore' ? 'restoring a backup' : 'verifying a backup');
    },
  });
}
