/**
 * Crypto envelope v1 (docs/crypto.md): only libsodium primitives, composed as that document describes.
 *
 *   KEK         = Argon2id13(passphrase NFC UTF-8, salt 16 B, opslimit, memlimit) → 32 B
 *   master key  = 32 random bytes, XChaCha20-Poly1305-IETF(KEK, nonce 24 B, AD "coffer/v1/master")
 *   DEK         = 32 random bytes per backup, XChaCha20-Poly1305-IETF(master, nonce, AD "coffer/v1/dek/<id>")
 *   metadata    = JSON, XChaCha20-Poly1305-IETF(DEK, nonce, AD "coffer/v1/metadata/<id>")
 *   archive     = secretstream XChaCha20-Poly1305(DEK): 24 B header, then 64 KiB plaintext chunks, each
 *                 + 17 B; every chunk TAG_MESSAGE except the last, TAG_FINAL (truncation is detected)
 *
 * Binary values travel as standard padded base64. Secret keys live in sodium_malloc'd buffers.
 */
import { Transform, type TransformCallback } from 'node:stream';
import sodium from 'sodium-native';
import {
  AD,
  type BackupMetadata,
  CHUNK_BYTES,
  CRYPTO_VERSION,
  DEFAULT_KDF_PROFILE,
  IntegrityError,
  KDF_ACCEPTED_MAX,
  type KdfProfile,
} from './envelope-format.js';

export { AD, type BackupMetadata, CHUNK_BYTES, CRYPTO_VERSION, DEFAULT_KDF_PROFILE, IntegrityError, KDF_ACCEPTED_MAX, type KdfProfile };

export const KEY_BYTES = 32;
export const SALT_BYTES = sodium.crypto_pwhash_SALTBYTES; // 16
export const NONCE_BYTES = sodium.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES; // 24
export const AEAD_ABYTES = sodium.crypto_aead_xchacha20poly1305_ietf_ABYTES; // 16
export const STREAM_HEADER_BYTES = sodium.crypto_secretstream_xchacha20poly1305_HEADERBYTES; // 24
export const STREAM_ABYTES = sodium.crypto_secretstream_xchacha20poly1305_ABYTES; // 17
const TAG_MESSAGE = sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE;
const TAG_FINAL = sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL;
const STATE_BYTES = sodium.crypto_secretstream_xchacha20poly1305_STATEBYTES;

// ---- key derivation ----

export interface KdfLimits {
  opslimit: number;
  memlimit: number;
}

export interface KdfParams extends KdfLimits {
  salt: Buffer;
}

/** Argon2id cost profiles (libsodium's named limits), one for each of KDF_PROFILE_NAMES. */
export const KDF_PROFILES = {
  min: { opslimit: sodium.crypto_pwhash_OPSLIMIT_MIN, memlimit: sodium.crypto_pwhash_MEMLIMIT_MIN },
  interactive: {
    opslimit: sodium.crypto_pwhash_OPSLIMIT_INTERACTIVE,
    memlimit: sodium.crypto_pwhash_MEMLIMIT_INTERACTIVE,
  },
  moderate: { opslimit: sodium.crypto_pwhash_OPSLIMIT_MODERATE, memlimit: sodium.crypto_pwhash_MEMLIMIT_MODERATE },
  sensitive: {
    opslimit: sodium.crypto_pwhash_OPSLIMIT_SENSITIVE,
    memlimit: sodium.crypto_pwhash_MEMLIMIT_SENSITIVE,
  },
} as const satisfies Record<KdfProfile, KdfLimits>;
export const isKdfProfile = (value: string): value is KdfProfile => Object.hasOwn(KDF_PROFILES, value);


export function newKdfParams(profile: KdfProfile = DEFAULT_KDF_PROFILE): KdfParams {
  return { salt: randomBytes(SALT_BYTES), ...KDF_PROFILES[profile] };
}

function checkKdf(kdf: KdfParams): void {
  const { opslimit, memlimit, salt } = kdf;
  if (salt.length !== SALT_BYTES) throw new IntegrityError(`the vault salt must be ${SALT_BYTES} bytes`);
  if (!Number.isInteger(opslimit) || opslimit < sodium.crypto_pwhash_OPSLIMIT_MIN || opslimit > KDF_ACCEPTED_MAX.opslimit) {
    throw new IntegrityError(`the vault's Argon2id opslimit (${opslimit}) is outside the accepted range`);
  }
  if (!Number.isInteger(memlimit) || memlimit < sodium.crypto_pwhash_MEMLIMIT_MIN || memlimit > KDF_ACCEPTED_MAX.memlimit) {
    throw new IntegrityError(`the vault's Argon2id memlimit (${memlimit}) is outside the accepted range`);
  }
}

/** The passphrase as bytes: Unicode NFC, UTF-8. In a secure buffer, zeroed by the caller. */
function passphraseBytes(passphrase: string): Buffer {
  const normalized = passphrase.normalize('NFC');
  const bytes = sodium.sodium_malloc(Buffer.byteLength(normalized, 'utf8'));
  bytes.write(normalized, 'utf8');
  return bytes;
}

/** KEK = Argon2id13(passphrase, salt, opslimit, memlimit), 32 bytes (runs off the main thread). */
export async function deriveKek(passphrase: string, kdf: KdfParams): Promise<Buffer> {
  checkKdf(kdf);
  const password = passphraseBytes(passphrase);
  const kek = sodium.sodium_malloc(KEY_BYTES);
  try {
    await sodium.crypto_pwhash_async(kek, password, kdf.salt, kdf.opslimit, kdf.memlimit, sodium.crypto_pwhash_ALG_ARGON2ID13);
  } finally {
    sodium.sodium_memzero(password);
  }
  return kek;
}

// ---- AEAD (XChaCha20-Poly1305-IETF) ----

export function randomBytes(length: number): Buffer {
  const bytes = Buffer.alloc(length);
  sodium.randombytes_buf(bytes);
  return bytes;
}

/** A fresh 32-byte key in a secure buffer. */
export function newKey(): Buffer {
  const key = sodium.sodium_malloc(KEY_BYTES);
  sodium.randombytes_buf(key);
  return key;
}

export function wipe(...buffers: (Buffer | undefined)[]): void {
  for (const buffer of buffers) if (buffer) sodium.sodium_memzero(buffer);
}

export function seal(key: Buffer, plaintext: Buffer, ad: string, nonce: Buffer = randomBytes(NONCE_BYTES)) {
  if (nonce.length !== NONCE_BYTES) throw new Error(`nonce must be ${NONCE_BYTES} bytes`);
  const ciphertext = Buffer.alloc(plaintext.length + AEAD_ABYTES);
  sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(ciphertext, plaintext, Buffer.from(ad, 'utf8'), null, nonce, key);
  return { ciphertext, nonce };
}

/** Opens an AEAD box into `into` (default: a new buffer); throws IntegrityError(`what`) when it does not verify. */
export function open(key: Buffer, ciphertext: Buffer, nonce: Buffer, ad: string, what: string, into?: Buffer): Buffer {
  if (nonce.length !== NONCE_BYTES || ciphertext.length < AEAD_ABYTES) throw new IntegrityError(what);
  const plaintext = into ?? Buffer.alloc(ciphertext.length - AEAD_ABYTES);
  if (plaintext.length !== ciphertext.length - AEAD_ABYTES) throw new IntegrityError(what);
  try {
    sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(plaintext, null, ciphertext, Buffer.from(ad, 'utf8'), nonce, key);
  } catch {
    throw new IntegrityError(what);
  }
  return plaintext;
}

// ---- base64 (standard, padded: docs/api-rules.md#encoding) ----

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const toBase64 = (bytes: Buffer): string => bytes.toString('base64');

/** Strict decoding of a server-provided field: anything but canonical padded base64 is an integrity failure. */
export function fromBase64(value: string | null | undefined, field: string): Buffer {
  if (typeof value !== 'string' || !BASE64.test(value)) throw new IntegrityError(`${field} is missing or not base64`);
  return Buffer.from(value, 'base64');
}

// ---- vault: the wrapped master key ----

/** The fields of a BackupAccountEnvelope (bootstrap/rotate body) and of an initialized BackupAccount. */
export interface VaultMaterial {
  cryptoVersion: typeof CRYPTO_VERSION;
  kdf: { salt: string; opslimit: number; memlimit: number };
  wrappedMasterKey: string;
  wrappedMasterKeyNonce: string;
}

/** Wraps `masterKey` under a KEK derived from `passphrase` with new (or given) KDF parameters. */
export async function wrapMasterKey(
  masterKey: Buffer,
  passphrase: string,
  kdf: KdfParams = newKdfParams(),
  nonce?: Buffer,
): Promise<VaultMaterial> {
  const kek = await deriveKek(passphrase, kdf);
  try {
    const box = seal(kek, masterKey, AD.master, nonce);
    return {
      cryptoVersion: CRYPTO_VERSION,
      kdf: { salt: toBase64(kdf.salt), opslimit: kdf.opslimit, memlimit: kdf.memlimit },
      wrappedMasterKey: toBase64(box.ciphertext),
      wrappedMasterKeyNonce: toBase64(box.nonce),
    };
  } finally {
    wipe(kek);
  }
}

const WRONG_PASSPHRASE = 'wrong passphrase (or the vault material was altered)';

/** The master key, in a secure buffer. Throws IntegrityError on a wrong passphrase or altered material. */
export async function unwrapMasterKey(
  vault: {
    cryptoVersion: string | null;
    kdf: { salt: string; opslimit: number; memlimit: number } | null;
    wrappedMasterKey: string | null;
    wrappedMasterKeyNonce: string | null;
  },
  passphrase: string,
): Promise<Buffer> {
  if (vault.cryptoVersion !== CRYPTO_VERSION) {
    throw new IntegrityError(`unsupported vault crypto version ${JSON.stringify(vault.cryptoVersion)}`);
  }
  if (!vault.kdf) throw new IntegrityError('the vault has no key-derivation parameters');
  const kdf = { salt: fromBase64(vault.kdf.salt, 'kdf.salt'), opslimit: vault.kdf.opslimit, memlimit: vault.kdf.memlimit };
  const wrapped = fromBase64(vault.wrappedMasterKey, 'wrappedMasterKey');
  const nonce = fromBase64(vault.wrappedMasterKeyNonce, 'wrappedMasterKeyNonce');
  if (wrapped.length !== KEY_BYTES + AEAD_ABYTES) throw new IntegrityError(WRONG_PASSPHRASE);
  const kek = await deriveKek(passphrase, kdf);
  try {
    return open(kek, wrapped, nonce, AD.master, WRONG_PASSPHRASE, sodium.sodium_malloc(KEY_BYTES));
  } finally {
    wipe(kek);
  }
}

// ---- per-backup data key and metadata ----

export interface WrappedDek {
  wrappedDek: string;
  wrappedDekNonce: string;
}

export function wrapDek(masterKey: Buffer, backupId: string, dek: Buffer, nonce?: Buffer): WrappedDek {
  const box = seal(masterKey, dek, AD.dek(backupId), nonce);
  return { wrappedDek: toBase64(box.ciphertext), wrappedDekNonce: toBase64(box.nonce) };
}

export function unwrapDek(
  masterKey: Buffer,
  backupId: string,
  fields: { wrappedDek: string | null; wrappedDekNonce: string | null },
): Buffer {
  const what = 'the backup data key does not belong to this backup or vault (wrappedDek altered or swapped)';
  const wrapped = fromBase64(fields.wrappedDek, 'wrappedDek');
  const nonce = fromBase64(fields.wrappedDekNonce, 'wrappedDekNonce');
  if (wrapped.length !== KEY_BYTES + AEAD_ABYTES) throw new IntegrityError(what);
  return open(masterKey, wrapped, nonce, AD.dek(backupId), what, sodium.sodium_malloc(KEY_BYTES));
}

export interface SealedMetadata {
  encryptedMetadata: string;
  encryptedMetadataNonce: string;
}

export function sealMetadata(dek: Buffer, backupId: string, metadata: BackupMetadata, nonce?: Buffer): SealedMetadata {
  const box = seal(dek, Buffer.from(JSON.stringify(metadata), 'utf8'), AD.metadata(backupId), nonce);
  return { encryptedMetadata: toBase64(box.ciphertext), encryptedMetadataNonce: toBase64(box.nonce) };
}

export function openMetadata(
  dek: Buffer,
  backupId: string,
  fields: { encryptedMetadata: string | null; encryptedMetadataNonce: string | null },
): BackupMetadata {
  const sealed = fromBase64(fields.encryptedMetadata, 'encryptedMetadata');
  const nonce = fromBase64(fields.encryptedMetadataNonce, 'encryptedMetadataNonce');
  const plain = open(dek, sealed, nonce, AD.metadata(backupId), 'the backup metadata was altered');
  let parsed: unknown;
  try {
    parsed = JSON.parse(plain.toString('utf8'));
  } catch {
    throw new IntegrityError('the backup metadata is not JSON');
  }
  const m = parsed as Partial<BackupMetadata>;
  const ok =
    typeof m === 'object' && m !== null &&
    m.format === 'coffer-archive/v1' &&
    m.archive === 'tar' &&
    m.compression === 'gzip' &&
    m.chunkBytes === CHUNK_BYTES &&
    typeof m.plaintextSha256 === 'string' && /^[0-9a-f]{64}$/.test(m.plaintextSha256) &&
    Number.isSafeInteger(m.plaintextSizeBytes) &&
    Number.isSafeInteger(m.ciphertextSizeBytes);
  if (!ok) throw new IntegrityError('the backup metadata is not coffer-archive/v1 metadata');
  return m as BackupMetadata;
}

// ---- the archive stream (crypto_secretstream_xchacha20poly1305) ----

/** Exact ciphertext size for `plainBytes` of stream input: header + one 17-byte overhead per chunk (≥ 1 chunk). */
export function ciphertextSize(plainBytes: number): number {
  const chunks = Math.max(1, Math.ceil(plainBytes / CHUNK_BYTES));
  return STREAM_HEADER_BYTES + plainBytes + chunks * STREAM_ABYTES;
}

/** Encrypts a byte stream: emits the header, then one sealed chunk per 64 KiB, the last one TAG_FINAL. */
export class EncryptStream extends Transform {
  private readonly state = sodium.sodium_malloc(STATE_BYTES);
  private readonly pending = Buffer.alloc(CHUNK_BYTES);
  private filled = 0;
  private started = false;

  constructor(private readonly key: Buffer) {
    super();
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    const header = Buffer.alloc(STREAM_HEADER_BYTES);
    sodium.crypto_secretstream_xchacha20poly1305_init_push(this.state, header, this.key);
    this.push(header);
  }

  private sealChunk(length: number, tag: number): void {
    const plain = this.pending.subarray(0, length);
    const sealed = Buffer.allocUnsafe(length + STREAM_ABYTES);
    sodium.crypto_secretstream_xchacha20poly1305_push(this.state, sealed, plain, null, tag);
    this.push(sealed);
    this.filled = 0;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.start();
      let offset = 0;
      while (offset < chunk.length) {
        // A full pending chunk is only sealed once more data shows it is not the last one.
        if (this.filled === CHUNK_BYTES) this.sealChunk(CHUNK_BYTES, TAG_MESSAGE);
        const take = Math.min(CHUNK_BYTES - this.filled, chunk.length - offset);
        chunk.copy(this.pending, this.filled, offset, offset + take);
        this.filled += take;
        offset += take;
      }
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.start();
      this.sealChunk(this.filled, TAG_FINAL);
      this.wipe();
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  private wipe(): void {
    wipe(this.state, this.pending);
  }

  override _destroy(error: Error | null, callback: (error: Error | null) => void): void {
    this.wipe();
    callback(error);
  }
}

/**
 * Decrypts and authenticates a secretstream: every chunk must verify, the last one must carry TAG_FINAL and
 * nothing may follow it. Plaintext is released chunk by chunk (bounded memory); consumers must treat it as
 * unconfirmed until this stream has ended without error.
 */
export class DecryptStream extends Transform {
  private readonly state = sodium.sodium_malloc(STATE_BYTES);
  private readonly frame = Buffer.alloc(CHUNK_BYTES + STREAM_ABYTES);
  private readonly header = Buffer.alloc(STREAM_HEADER_BYTES);
  private headerFilled = 0;
  private filled = 0;
  private chunks = 0;
  private finished = false;
  private readonly tag = Buffer.alloc(1);

  constructor(private readonly key: Buffer) {
    super();
  }

  private open(length: number): void {
    if (length < STREAM_ABYTES) throw new IntegrityError('the archive is truncated (partial chunk)');
    const plain = Buffer.allocUnsafe(length - STREAM_ABYTES);
    try {
      sodium.crypto_secretstream_xchacha20poly1305_pull(this.state, plain, this.tag, this.frame.subarray(0, length), null);
    } catch {
      throw new IntegrityError(`archive chunk ${this.chunks} failed authentication (tampered, truncated or wrong key)`);
    }
    this.chunks += 1;
    const tag = this.tag[0];
    if (tag === TAG_FINAL) this.finished = true;
    else if (tag !== TAG_MESSAGE) throw new IntegrityError(`archive chunk ${this.chunks - 1} has an unexpected tag`);
    this.filled = 0;
    if (plain.length > 0) this.push(plain);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      let offset = 0;
      if (this.headerFilled < STREAM_HEADER_BYTES) {
        const take = Math.min(STREAM_HEADER_BYTES - this.headerFilled, chunk.length);
        chunk.copy(this.header, this.headerFilled, 0, take);
        this.headerFilled += take;
        offset = take;
        if (this.headerFilled === STREAM_HEADER_BYTES) {
          sodium.crypto_secretstream_xchacha20poly1305_init_pull(this.state, this.header, this.key);
        }
      }
      while (offset < chunk.length) {
        if (this.finished) throw new IntegrityError('the archive has data after its final chunk');
        const take = Math.min(this.frame.length - this.filled, chunk.length - offset);
        chunk.copy(this.frame, this.filled, offset, offset + take);
        this.filled += take;
        offset += take;
        if (this.filled === this.frame.length) this.open(this.frame.length);
      }
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      if (this.headerFilled < STREAM_HEADER_BYTES) throw new IntegrityError('the archive is truncated (no header)');
      if (!this.finished && this.filled > 0) this.open(this.filled);
      if (!this.finished) throw new IntegrityError('the archive is truncated (final chunk missing)');
      wipe(this.state);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _destroy(error: Error | null, callback: (error: Error | null) => void): void {
    wipe(this.state, this.frame);
    callback(error);
  }
}
