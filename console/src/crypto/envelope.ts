/**
 * Crypto envelope v1 in the browser (docs/crypto.md): the same construction as the CLI's src/client/envelope.ts,
 * on libsodium compiled to WebAssembly (libsodium-wrappers-sumo: crypto_pwhash, XChaCha20-Poly1305, secretstream).
 *
 *   KEK         = Argon2id13(passphrase NFC UTF-8, salt 16 B, opslimit, memlimit) → 32 B
 *   master key  = XChaCha20-Poly1305-IETF(KEK, nonce 24 B, AD "coffer/v1/master")
 *   DEK         = XChaCha20-Poly1305-IETF(master, nonce, AD "coffer/v1/dek/<id>")
 *   metadata    = XChaCha20-Poly1305-IETF(DEK, nonce, AD "coffer/v1/metadata/<id>")
 *   archive     = secretstream(DEK): 24 B header, frames of 64 KiB + 17 B, the last one TAG_FINAL
 *
 * Environment-neutral (no DOM, no Node API): the page's worker, the page's self-test and a Node test all use it.
 */
import sodium from 'libsodium-wrappers-sumo';
import {
  AD,
  type BackupMetadata,
  CHUNK_BYTES,
  CRYPTO_VERSION,
  IntegrityError,
  KDF_ACCEPTED_MAX,
  requireRequestedBackup,
} from '../../../src/client/envelope-format.js';

export { AD, type BackupMetadata, CHUNK_BYTES, CRYPTO_VERSION, IntegrityError, KDF_ACCEPTED_MAX, requireRequestedBackup };

export const ready: Promise<void> = sodium.ready;

export const KEY_BYTES = 32;
export const SALT_BYTES = 16;
export const NONCE_BYTES = 24;
export const AEAD_ABYTES = 16;
export const STREAM_HEADER_BYTES = 24;
export const STREAM_ABYTES = 17;
const FRAME_BYTES = CHUNK_BYTES + STREAM_ABYTES;

const KDF_ACCEPTED_MIN = { opslimit: 1, memlimit: 8192 } as const;


export const WRONG_PASSPHRASE = 'wrong passphrase (or the vault material was altered)';

const utf8 = new TextEncoder();
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const toBase64 = (bytes: Uint8Array): string => sodium.to_base64(bytes, sodium.base64_variants.ORIGINAL);
export const toHex = (bytes: Uint8Array): string => sodium.to_hex(bytes);
export const fromHex = (hex: string): Uint8Array => sodium.from_hex(hex);

/** Strict decoding of a server-provided field: anything but canonical padded base64 is an integrity failure. */
export function fromBase64(value: string | null | undefined, field: string): Uint8Array {
  if (typeof value !== 'string' || !BASE64.test(value)) throw new IntegrityError(`${field} is missing or not base64`);
  return value === '' ? new Uint8Array(0) : sodium.from_base64(value, sodium.base64_variants.ORIGINAL);
}

export function wipe(...arrays: (Uint8Array | undefined)[]): void {
  for (const array of arrays) if (array) sodium.memzero(array);
}

// ---- key derivation ----

export interface KdfParams {
  salt: Uint8Array;
  opslimit: number;
  memlimit: number;
}

function checkKdf({ salt, opslimit, memlimit }: KdfParams): void {
  if (salt.length !== SALT_BYTES) throw new IntegrityError(`the vault salt must be ${SALT_BYTES} bytes`);
  if (!Number.isInteger(opslimit) || opslimit < KDF_ACCEPTED_MIN.opslimit || opslimit > KDF_ACCEPTED_MAX.opslimit) {
    throw new IntegrityError(`the vault's Argon2id opslimit (${opslimit}) is outside the accepted range`);
  }
  if (!Number.isInteger(memlimit) || memlimit < KDF_ACCEPTED_MIN.memlimit || memlimit > KDF_ACCEPTED_MAX.memlimit) {
    throw new IntegrityError(`the vault's Argon2id memlimit (${memlimit}) is outside the accepted range`);
  }
}

/** KEK = Argon2id13(NFC UTF-8 passphrase, salt, opslimit, memlimit), 32 bytes. */
export function deriveKek(passphrase: string, kdf: KdfParams): Uint8Array {
  checkKdf(kdf);
  const password = utf8.encode(passphrase.normalize('NFC'));
  try {
    return sodium.crypto_pwhash(KEY_BYTES, password, kdf.salt, kdf.opslimit, kdf.memlimit, sodium.crypto_pwhash_ALG_ARGON2ID13);
  } finally {
    wipe(password);
  }
}

// ---- AEAD (XChaCha20-Poly1305-IETF) ----

export function seal(key: Uint8Array, plaintext: Uint8Array, ad: string, nonce: Uint8Array = sodium.randombytes_buf(NONCE_BYTES)) {
  if (nonce.length !== NONCE_BYTES) throw new Error(`nonce must be ${NONCE_BYTES} bytes`);
  const ciphertext = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, utf8.encode(ad), null, nonce, key);
  return { ciphertext, nonce };
}

export function open(key: Uint8Array, ciphertext: Uint8Array, nonce: Uint8Array, ad: string, what: string): Uint8Array {
  if (nonce.length !== NONCE_BYTES || ciphertext.length < AEAD_ABYTES) throw new IntegrityError(what);
  try {
    return sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(null, ciphertext, utf8.encode(ad), nonce, key);
  } catch {
    throw new IntegrityError(what);
  }
}

// ---- vault ----

export interface VaultFields {
  cryptoVersion: string | null;
  kdf: { salt: string; opslimit: number; memlimit: number } | null;
  wrappedMasterKey: string | null;
  wrappedMasterKeyNonce: string | null;
}

/** The BackupAccountEnvelope that wraps `masterKey` under `passphrase` (used by the self-test vectors). */
export function wrapMasterKey(masterKey: Uint8Array, passphrase: string, kdf: KdfParams, nonce?: Uint8Array) {
  const kek = deriveKek(passphrase, kdf);
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

/** The master key; IntegrityError(WRONG_PASSPHRASE) when the passphrase is wrong or the material was altered. */
export function unwrapMasterKey(vault: VaultFields, passphrase: string): Uint8Array {
  if (vault.cryptoVersion !== CRYPTO_VERSION) {
    throw new IntegrityError(`unsupported vault crypto version ${JSON.stringify(vault.cryptoVersion)}`);
  }
  if (!vault.kdf) throw new IntegrityError('the vault has no key-derivation parameters');
  const kdf = { salt: fromBase64(vault.kdf.salt, 'kdf.salt'), opslimit: vault.kdf.opslimit, memlimit: vault.kdf.memlimit };
  const wrapped = fromBase64(vault.wrappedMasterKey, 'wrappedMasterKey');
  const nonce = fromBase64(vault.wrappedMasterKeyNonce, 'wrappedMasterKeyNonce');
  if (wrapped.length !== KEY_BYTES + AEAD_ABYTES) throw new IntegrityError(WRONG_PASSPHRASE);
  const kek = deriveKek(passphrase, kdf);
  try {
    return open(kek, wrapped, nonce, AD.master, WRONG_PASSPHRASE);
  } finally {
    wipe(kek);
  }
}

// ---- per backup: data key and metadata ----

export function wrapDek(masterKey: Uint8Array, backupId: string, dek: Uint8Array, nonce?: Uint8Array) {
  const box = seal(masterKey, dek, AD.dek(backupId), nonce);
  return { wrappedDek: toBase64(box.ciphertext), wrappedDekNonce: toBase64(box.nonce) };
}

export function unwrapDek(
  masterKey: Uint8Array,
  backupId: string,
  fields: { wrappedDek: string | null; wrappedDekNonce: string | null },
): Uint8Array {
  const what = 'the backup data key does not belong to this backup or vault (wrappedDek altered or swapped)';
  const wrapped = fromBase64(fields.wrappedDek, 'wrappedDek');
  const nonce = fromBase64(fields.wrappedDekNonce, 'wrappedDekNonce');
  if (wrapped.length !== KEY_BYTES + AEAD_ABYTES) throw new IntegrityError(what);
  return open(masterKey, wrapped, nonce, AD.dek(backupId), what);
}

export function sealMetadataJson(dek: Uint8Array, backupId: string, json: string, nonce?: Uint8Array) {
  const box = seal(dek, utf8.encode(json), AD.metadata(backupId), nonce);
  return { encryptedMetadata: toBase64(box.ciphertext), encryptedMetadataNonce: toBase64(box.nonce) };
}

export function openMetadata(
  dek: Uint8Array,
  backupId: string,
  fields: { encryptedMetadata: string | null; encryptedMetadataNonce: string | null },
): BackupMetadata {
  const sealed = fromBase64(fields.encryptedMetadata, 'encryptedMetadata');
  const nonce = fromBase64(fields.encryptedMetadataNonce, 'encryptedMetadataNonce');
  const plain = open(dek, sealed, nonce, AD.metadata(backupId), 'the backup metadata was altered');
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(plain));
  } catch {
    throw new IntegrityError('the backup metadata is not JSON');
  }
  const m = parsed as Partial<BackupMetadata> | null;
  const ok =
    typeof m === 'object' &&
    m !== null &&
    m.format === 'coffer-archive/v1' &&
    m.archive === 'tar' &&
    m.compression === 'gzip' &&
    m.chunkBytes === CHUNK_BYTES &&
    typeof m.plaintextSha256 === 'string' &&
    /^[0-9a-f]{64}$/.test(m.plaintextSha256) &&
    Number.isSafeInteger(m.plaintextSizeBytes) &&
    Number.isSafeInteger(m.ciphertextSizeBytes);
  if (!ok) throw new IntegrityError('the backup metadata is not coffer-archive/v1 metadata');
  return m as BackupMetadata;
}

// ---- the archive stream ----

/**
 * Decrypts crypto_secretstream_xchacha20poly1305 fed in pieces of any size: every frame must verify, the last one
 * must carry TAG_FINAL, nothing may follow it. Plaintext comes out frame by frame and is unconfirmed until
 * finish() returned without throwing.
 */
export class SecretStreamReader {
  private state: ReturnType<typeof sodium.crypto_secretstream_xchacha20poly1305_init_pull> | null = null;
  private readonly header = new Uint8Array(STREAM_HEADER_BYTES);
  private headerFilled = 0;
  private readonly frame = new Uint8Array(FRAME_BYTES);
  private filled = 0;
  private frames = 0;
  private finished = false;
  /** Ciphertext bytes seen so far. */
  bytesIn = 0;

  constructor(private readonly key: Uint8Array) {}

  private pull(length: number): Uint8Array {
    if (length < STREAM_ABYTES) throw new IntegrityError('the archive is truncated (partial chunk)');
    let result: { message: Uint8Array; tag: number } | false;
    try {
      result = sodium.crypto_secretstream_xchacha20poly1305_pull(this.state!, this.frame.slice(0, length), null);
    } catch {
      result = false;
    }
    if (!result) {
      throw new IntegrityError(`archive chunk ${this.frames} failed authentication (tampered, truncated or wrong key)`);
    }
    this.frames += 1;
    if (result.tag === sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL) this.finished = true;
    else if (result.tag !== sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE) {
      throw new IntegrityError(`archive chunk ${this.frames - 1} has an unexpected tag`);
    }
    this.filled = 0;
    return result.message;
  }

  /** Feeds ciphertext; returns the plaintext of every frame it completed. */
  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    this.bytesIn += chunk.length;
    let offset = 0;
    if (this.headerFilled < STREAM_HEADER_BYTES) {
      const take = Math.min(STREAM_HEADER_BYTES - this.headerFilled, chunk.length);
      this.header.set(chunk.subarray(0, take), this.headerFilled);
      this.headerFilled += take;
      offset = take;
      if (this.headerFilled === STREAM_HEADER_BYTES) {
        this.state = sodium.crypto_secretstream_xchacha20poly1305_init_pull(this.header, this.key);
      }
    }
    while (offset < chunk.length) {
      if (this.finished) throw new IntegrityError('the archive has data after its final chunk');
      const take = Math.min(FRAME_BYTES - this.filled, chunk.length - offset);
      this.frame.set(chunk.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
      if (this.filled === FRAME_BYTES) {
        const plain = this.pull(FRAME_BYTES);
        if (plain.length > 0) out.push(plain);
      }
    }
    return out;
  }

  /** Ends the stream: the last (short) frame, and the proof that the final tag was seen. */
  finish(): Uint8Array[] {
    if (this.headerFilled < STREAM_HEADER_BYTES) throw new IntegrityError('the archive is truncated (no header)');
    const out: Uint8Array[] = [];
    if (!this.finished && this.filled > 0) {
      const plain = this.pull(this.filled);
      if (plain.length > 0) out.push(plain);
    }
    if (!this.finished) throw new IntegrityError('the archive is truncated (final chunk missing)');
    wipe(this.frame);
    return out;
  }
}

/** Streaming SHA-256 (libsodium), for the plaintext check against the sealed metadata. */
export class Sha256 {
  private readonly state = sodium.crypto_hash_sha256_init();
  update(bytes: Uint8Array): void {
    sodium.crypto_hash_sha256_update(this.state, bytes);
  }
  hex(): string {
    return sodium.to_hex(sodium.crypto_hash_sha256_final(this.state));
  }
}
