/**
 * The application API on Node: ./app/coffer.ts on sodium-native, node:zlib (zstd where Node has it) and
 * node:crypto, plus what only Node has, a file system: a Vault or a write-only session backs up a directory
 * (`backup("/path")`) and a Vault restores to a directory (`restoreTo`) or one file (`restoreFile`). Those run the
 * CLI's own pipelines (runBackup, runRestore: the same scan, archive, extraction policy and checks).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import { VERSION } from '../lib/version.js';
import {
  apiOf,
  Coffer,
  Vault,
  WriteOnlySession,
  type AppBackupOptions,
  type AppBackupResult,
  type BackupSource,
  type CallOptions,
  type ConnectOptions,
} from './app/coffer.js';
import { applicationOf } from './app/pipeline.js';
import type { ApiOptions, ByteStage, Platform } from './app/platform.js';
import { runBackup, type BackupOptions } from './backup.js';
import { compressor, decompressor, defaultCompression } from './compression.js';
import { nodePrimitives, type Recipient } from './envelope.js';
import { runRestore, type RestoreResult } from './restore.js';
import { uploadPresigned } from './presigned-upload.js';
import { CofferClient } from './sdk.js';

/** A Node stream as a web stream stage. */
const stage = (duplex: Duplex): ByteStage => Duplex.toWeb(duplex) as unknown as ByteStage;

/** The Node platform of the application API (./app/platform.ts). */
export const nodePlatform: Platform = {
  clientVersion: `coffer-sdk/${VERSION}`,
  primitives: nodePrimitives,
  writeCompression: defaultCompression(),
  compress: (compression) => stage(compressor(compression)),
  decompress: (compression, sealedSize) => stage(decompressor(compression, sealedSize)),
  sha256() {
    const hash = createHash('sha256');
    return { update: (bytes) => void hash.update(bytes), hexDigest: () => hash.digest('hex') };
  },
  uploadBody: (ciphertext) => Promise.resolve({ body: ciphertext }),
  async uploadToStore(api, backupId, ciphertext, options) {
    const chunks = Readable.fromWeb(ciphertext as NodeReadableStream<Uint8Array>);
    const outcome = await uploadPresigned(api as CofferClient, backupId, chunks, options);
    if (outcome.uploaded) return outcome;
    return { uploaded: false, rest: Readable.toWeb(Readable.from(outcome.rest)) as unknown as ReadableStream<Uint8Array> };
  },
  api: (options: ApiOptions) =>
    new CofferClient({
      baseUrl: options.url,
      apiKey: options.apiKey,
      userAgent: `coffer-sdk/${VERSION} node`,
      requestTimeoutMs: options.timeoutMs,
      maxRetries: options.maxRetries,
      fetch: options.fetch,
    }),
};

/** Options of a directory backup: the application options, and the CLI's exclude rules. */
export interface DirectoryBackupOptions extends AppBackupOptions {
  /** gitignore-style patterns (relative to the directory); `.cofferignore` files are honoured too. */
  exclude?: readonly string[];
}

/** Options of a restore to the file system. */
export interface RestoreToOptions extends CallOptions {
  /** Restore into a non-empty directory (merging, replacing what the backup holds). */
  force?: boolean;
  /** gitignore-style patterns: restore only the entries they match. */
  include?: readonly string[];
}

/** A directory backup through the CLI's pipeline, sealed with `seal` (the master key or the recipient). */
async function backupDirectory(
  client: CofferClient,
  seal: Pick<BackupOptions, 'masterKey' | 'recipient'>,
  directory: string,
  options: DirectoryBackupOptions,
): Promise<AppBackupResult> {
  const application = applicationOf(options);
  const result = await runBackup({
    client,
    ...seal,
    source: directory,
    exclude: options.exclude,
    name: options.name,
    hostappVersion: options.hostappVersion,
    ...(application ? { application } : {}),
    signal: options.signal,
    onEvent: (event) => {
      if (event.type === 'progress') options.onProgress?.({ plaintextBytes: event.plaintextBytes, ciphertextBytes: event.ciphertextBytes });
    },
  });
  return { id: result.detail.id, detail: result.detail, metadata: result.metadata };
}

/** An unlocked vault on Node: also backs up a directory, and restores to a directory or a file. */
export class NodeVault extends Vault {
  /**
   * Backs up a directory (a path: a string), or any source of Vault.backup. A directory goes through the CLI's
   * pipeline: its files, directories, symlinks, modes and mtimes, exclude rules and `.cofferignore`.
   */
  override async backup(source: BackupSource | string, options: DirectoryBackupOptions = {}): Promise<AppBackupResult> {
    if (typeof source !== 'string') return super.backup(source, options);
    await this.coffer.checkServer(options);
    return backupDirectory(this.coffer.api as CofferClient, { masterKey: this.masterKey as Buffer }, source, options);
  }

  /** Restores a backup into `directory` (created if missing; it must be empty unless `force`), as `coffer restore`. */
  async restoreTo(id: string, directory: string, options: RestoreToOptions = {}): Promise<RestoreResult> {
    await this.coffer.checkServer(options);
    return runRestore({
      client: this.coffer.api as CofferClient,
      masterKey: this.masterKey as Buffer,
      backupId: id,
      target: directory,
      force: options.force,
      include: options.include,
      signal: options.signal,
    });
  }

  /**
   * Writes one file of a backup to `file`: the file of a raw backup (bytes or a stream), or the entry named
   * `options.entry` of an archive. Written beside `file` and renamed onto it only once the whole backup checked
   * out; nothing is left on failure.
   */
  async restoreFile(id: string, file: string, options: CallOptions & { entry?: string } = {}): Promise<{ bytes: number }> {
    const partial = path.join(path.dirname(file), `.${path.basename(file)}.coffer-${process.pid}-${Date.now()}`);
    let found = false;
    try {
      for await (const entry of this.restore(id, options)) {
        if (found || entry.type !== 'file' || (options.entry !== undefined && entry.name !== options.entry)) continue;
        found = true;
        await pipeline(Readable.fromWeb(entry.stream as NodeReadableStream<Uint8Array>), fs.createWriteStream(partial, { flags: 'wx' }));
      }
      if (!found) throw new Error(options.entry === undefined ? `backup ${id} holds no file` : `backup ${id} has no file ${options.entry}`);
      const { size } = await fsp.stat(partial);
      await fsp.rename(partial, file);
      return { bytes: size };
    } finally {
      await fsp.rm(partial, { force: true });
    }
  }
}

/** A write-only session on Node: also backs up a directory. */
export class NodeWriteOnlySession extends WriteOnlySession {
  /** @internal */
  constructor(
    coffer: Coffer,
    private readonly recipient: Recipient,
  ) {
    super(coffer, recipient);
  }

  /** Backs up a directory (a path), or any source of WriteOnlySession.backup. */
  override async backup(source: BackupSource | string, options: DirectoryBackupOptions = {}): Promise<AppBackupResult> {
    if (typeof source !== 'string') return super.backup(source, options);
    await this.coffer.checkServer(options);
    return backupDirectory(this.coffer.api as CofferClient, { recipient: this.recipient }, source, options);
  }
}

/** A connection on Node: its sessions are NodeVault and NodeWriteOnlySession. */
export class NodeCoffer extends Coffer {
  /** Coffer.unlock, giving a NodeVault (directory backup, restoreTo, restoreFile). */
  override unlock(secret: { passphrase: string } | { kit: string }, options: CallOptions = {}): Promise<NodeVault> {
    return super.unlock(secret, options) as Promise<NodeVault>;
  }

  /** @internal */
  protected override vaultOf(masterKey: Uint8Array): NodeVault {
    return new NodeVault(this, masterKey);
  }

  /** Coffer.writer, giving a NodeWriteOnlySession (it also backs up a directory). */
  override writer(recipient: string): NodeWriteOnlySession {
    return new NodeWriteOnlySession(this, this.envelope.parseRecipient(recipient));
  }

  /** The same as writer(). */
  override withRecipient(recipient: string): NodeWriteOnlySession {
    return this.writer(recipient);
  }
}

/** Connects to a server from Node (the platform is Node's). */
export function connect(options: Omit<ConnectOptions, 'platform'> & { platform?: Platform }): NodeCoffer {
  const platform = options.platform ?? nodePlatform;
  return new NodeCoffer(apiOf(options, platform), platform);
}
