/**
 * The fixed facts of crypto envelope v1 (docs/crypto.md), shared by the CLI (sodium-native) and the console
 * page (libsodium in WebAssembly). It imports only pure domain/ code, so both runtimes can use it.
 */
export const CRYPTO_VERSION = 'v1' as const;

/** Plaintext bytes per secretstream message; the last message carries TAG_FINAL. */
export const CHUNK_BYTES = 64 * 1024;

/** Associated data binding each ciphertext to its role (and to its backup, so keys cannot be swapped). */
export const AD = {
  master: 'coffer/v1/master',
  dek: (backupId: string) => `coffer/v1/dek/${backupId}`,
  metadata: (backupId: string) => `coffer/v1/metadata/${backupId}`,
  sealedDek: (backupId: string, fingerprint: string) => `coffer/v1/sealed-dek/${backupId}/${fingerprint}`,
} as const;

/**
 * Recipients (docs/crypto.md §2b): an X-Wing key pair derived from the master key, so a backup host holding only
 * the public key can seal a backup's DEK it cannot open again.
 */
export const RECIPIENT = {
  /** crypto_kdf_derive_from_key(32, subkeyId, context, master key) is the X-Wing seed. */
  kdfSubkeyId: 1,
  kdfContext: 'cofferxw',
  /** Bech32m human-readable part of the recipient string. */
  hrp: 'coffer',
  /** The first 4 bytes of a sealed wrappedDek. */
  magic: 'cxw1',
  publicKeyBytes: 1216,
  ciphertextBytes: 1120,
  fingerprintBytes: 8,
} as const;

/**
 * The keyring (docs/crypto.md §1b): the plaintext under the KEK is either one 32-byte master key (legacy) or
 * "ckr1" ‖ n (1 byte) ‖ n × 32-byte master keys, newest (current) first.
 */
export const KEYRING = {
  magic: 'ckr1',
  headerBytes: 5,
  maxKeys: 64,
} as const;

/** Anything that failed to authenticate or decode: wrong passphrase, tampering, truncation, a hostile archive. */
export class IntegrityError extends Error {
  override readonly name: string = 'IntegrityError';
}

/** The passphrase (or the kit) did not open the vault's key material: wrong, or the material was altered. */
export class WrongPassphraseError extends IntegrityError {
  override readonly name = 'WrongPassphraseError';
  constructor() {
    super('wrong passphrase (or the vault material was altered)');
  }
}

/**
 * Key material in a form this version does not read but a newer one may (docs/crypto.md "Older and newer clients"):
 * a keyring version after "ckr1" that the passphrase did open, or a wrappedDek with another "cxw" version. Still an
 * IntegrityError for the code that catches those (nothing could be opened), but the user is told to upgrade, not
 * that the passphrase is wrong.
 */
export class NewerFormatError extends IntegrityError {
  override readonly name = 'NewerFormatError';
}

/**
 * The one rule for opening a backup, in the CLI and the console alike: the DEK is unwrapped, the metadata opened
 * and the content downloaded for the id the user asked for, never for an id the (possibly hostile) server
 * answers, and an answer about another backup is refused. (The associated data binds the DEK and the metadata
 * to that id, so another backup's keys could not be opened as this one's anyway; this names the substitution.)
 */
export function requireRequestedBackup<T extends { id: string }>(requestedId: string, detail: T): T {
  if (detail.id !== requestedId) {
    throw new IntegrityError(`the server answered with backup ${JSON.stringify(detail.id)} when asked for ${JSON.stringify(requestedId)}`);
  }
  return detail;
}

export { DEFAULT_KDF_PROFILE, KDF_PROFILE_NAMES, type KdfProfile } from '../domain/kdf.js';

/** Bounds a client accepts from a (possibly hostile) server before spending CPU and memory (the minimums are libsodium's). */
export const KDF_ACCEPTED_MIN = { opslimit: 1, memlimit: 8192 } as const;
export const KDF_ACCEPTED_MAX = { opslimit: 64, memlimit: 4 * 1024 ** 3 } as const;

/** What a backup says about itself, sealed with its DEK (docs/crypto.md §3); the server never sees it. */
export interface BackupMetadata {
  format: 'coffer-archive/v1';
  name: string;
  sourcePath: string;
  createdAt: string;
  kind: 'directory' | 'file';
  fileCount: number;
  directoryCount: number;
  symlinkCount: number;
  /** `tar`: a tar stream; `raw`: the bytes of one file named `name` (a backup of standard input). */
  archive: ArchiveFormat;
  compression: Compression;
  chunkBytes: number;
  plaintextSizeBytes: number;
  plaintextSha256: string;
  ciphertextSizeBytes: number;
  /** Every path backed up, when there were several (optional: absent for one path and in older backups). */
  sources?: string[];
  /** How many entries exclude rules left out (optional). */
  excludedCount?: number;
  /** What was left out because it could not be read (--skip-unreadable) or cannot be archived (optional). */
  skipped?: SkippedEntry[];
  /** The link in its profile's history chain (docs/crypto.md §3a); absent on backups made without a profile. */
  chain?: {
    id: string;
    seq: number;
    previous: { backupId: string; ciphertextSha256: string; createdAt: string } | null;
  };
}

export type ArchiveFormat = 'tar' | 'raw';
export type Compression = 'gzip' | 'zstd';
export const ARCHIVE_FORMATS: readonly ArchiveFormat[] = ['tar', 'raw'];
export const COMPRESSIONS: readonly Compression[] = ['gzip', 'zstd'];

/**
 * A file name that is one path segment on every platform: the name of a raw (standard input) backup, restored as
 * `<target>/<name>`. Checked when the backup is made and again when its (authenticated) metadata is read.
 */
export function isPlainName(name: unknown): name is string {
  return (
    typeof name === 'string' &&
    name.length > 0 &&
    new TextEncoder().encode(name).length <= 255 &&
    name !== '.' &&
    name !== '..' &&
    // eslint-disable-next-line no-control-regex
    !/[/\\\u0000-\u001f\u007f]/.test(name)
  );
}

/** An entry a backup left out, with the reason in words. */
export interface SkippedEntry {
  path: string;
  reason: string;
}
