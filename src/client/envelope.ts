/**
 * Crypto envelope v1 (docs/crypto.md) for the CLI: the one envelope of ./envelope-core.ts on sodium-native
 * (libsodium, native), with the archive stream as Node Transforms. Secret keys live in sodium_malloc'd buffers.
 */
import { Transform, type TransformCallback } from 'node:stream';
import sodium from 'sodium-native';
import { SecretStreamReader, SecretStreamWriter, createEnvelope } from './envelope-core.js';
import type { Primitives } from './envelope-primitives.js';

export {
  AD,
  KEYRING,
  type BackupMetadata,
  CHUNK_BYTES,
  CRYPTO_VERSION,
  DEFAULT_KDF_PROFILE,
  IntegrityError,
  KDF_ACCEPTED_MAX,
  type KdfProfile,
  NewerFormatError,
  RECIPIENT,
  STREAM_ABYTES,
  STREAM_HEADER_BYTES,
  ciphertextSize,
} from './envelope-core.js';
export { AEAD_ABYTES, KEY_BYTES, NONCE_BYTES, SALT_BYTES } from './envelope-primitives.js';
export { KDF_PROFILES, type KdfLimits, type KdfParams, type VaultMaterial, isKdfProfile } from './envelope-vault.js';
export { type Recipient, RecipientFormatError } from './envelope-recipient.js';
export { type WrappedDek } from './envelope-dek.js';
export { type SealedMetadata } from './envelope-metadata.js';
export { SEALED_DEK_BYTES } from './key-usage.js';

const tag = Buffer.alloc(1);

/** The envelope's primitives on sodium-native: outputs are written in place, no copies. */
export const nodePrimitives: Primitives<Buffer> = {
  alloc: (length) => Buffer.allocUnsafe(length),
  secureAlloc: (length) => sodium.sodium_malloc(length),
  wipe: (bytes) => sodium.sodium_memzero(bytes),
  random: (into) => sodium.randombytes_buf(into),
  argon2id: (key, password, salt, opslimit, memlimit) =>
    sodium.crypto_pwhash_async(key, password, salt, opslimit, memlimit, sodium.crypto_pwhash_ALG_ARGON2ID13),
  aeadEncrypt(into, plaintext, ad, nonce, key) {
    sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(into, plaintext, ad, null, nonce, key);
  },
  aeadDecrypt(into, ciphertext, ad, nonce, key) {
    try {
      sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(into, null, ciphertext, ad, nonce, key);
      return true;
    } catch {
      return false;
    }
  },
  streamInitPush(header, key) {
    const state = sodium.sodium_malloc(sodium.crypto_secretstream_xchacha20poly1305_STATEBYTES);
    sodium.crypto_secretstream_xchacha20poly1305_init_push(state, header, key);
    return state;
  },
  streamPush(state, into, message, messageTag) {
    sodium.crypto_secretstream_xchacha20poly1305_push(state as Buffer, into, message, null, messageTag);
  },
  streamInitPull(header, key) {
    const state = sodium.sodium_malloc(sodium.crypto_secretstream_xchacha20poly1305_STATEBYTES);
    sodium.crypto_secretstream_xchacha20poly1305_init_pull(state, header, key);
    return state;
  },
  streamPull(state, into, frame) {
    try {
      sodium.crypto_secretstream_xchacha20poly1305_pull(state as Buffer, into, tag, frame, null);
    } catch {
      return undefined;
    }
    return tag[0];
  },
  streamWipe: (state) => sodium.sodium_memzero(state as Buffer),
  toBase64: (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64'),
  fromBase64: (value) => Buffer.from(value, 'base64'),
  kdfDerive: (into, subkeyId, context, key) => sodium.crypto_kdf_derive_from_key(into, subkeyId, Buffer.from(context, 'latin1'), key),
  sha256: (into, message) => sodium.crypto_hash_sha256(into, message),
};

export const {
  randomBytes,
  newKey,
  wipe,
  newKdfParams,
  deriveKek,
  wrapMasterKey,
  unwrapMasterKey,
  addMasterKey,
  keyMaterialOf,
  masterKeys,
  wrapDek,
  unwrapDek,
  deriveRecipient,
  parseRecipient,
  sealDek,
  sealMetadata,
  openMetadata,
} = createEnvelope(nodePrimitives);

/** Encrypts a byte stream: emits the header, then one sealed chunk per 64 KiB, the last one TAG_FINAL. */
export class EncryptStream extends Transform {
  private readonly writer: SecretStreamWriter<Buffer>;
  private readonly out = (sealed: Buffer) => this.push(sealed);

  constructor(key: Buffer) {
    super();
    this.writer = new SecretStreamWriter(nodePrimitives, key);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.writer.push(chunk, this.out);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.writer.finish(this.out);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _destroy(error: Error | null, callback: (error: Error | null) => void): void {
    this.writer.dispose();
    callback(error);
  }
}

/**
 * Decrypts and authenticates a secretstream: every chunk must verify, the last one must carry TAG_FINAL and
 * nothing may follow it. Plaintext is released chunk by chunk (bounded memory); consumers must treat it as
 * unconfirmed until this stream has ended without error.
 */
export class DecryptStream extends Transform {
  private readonly reader: SecretStreamReader<Buffer>;
  private readonly out = (plain: Buffer) => this.push(plain);

  constructor(key: Buffer) {
    super();
    this.reader = new SecretStreamReader(nodePrimitives, key);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.reader.push(chunk, this.out);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.reader.finish(this.out);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _destroy(error: Error | null, callback: (error: Error | null) => void): void {
    this.reader.dispose();
    callback(error);
  }
}
