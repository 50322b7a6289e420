/**
 * Crypto envelope v1 (docs/crypto.md) in the browser: the one envelope of src/client/envelope-core.ts on libsodium
 * compiled to WebAssembly (libsodium-wrappers-sumo: crypto_pwhash, XChaCha20-Poly1305, secretstream).
 *
 * Environment-neutral (no DOM, no Node API): the page's worker, the page's self-test and a Node test all use it.
 */
import sodium from 'libsodium-wrappers-sumo';
import { SecretStreamReader as CoreSecretStreamReader, createEnvelope } from '../../../src/client/envelope-core.js';
import type { Primitives } from '../../../src/client/envelope-primitives.js';

export {
  AD,
  type BackupMetadata,
  DEFAULT_KDF_PROFILE,
  type KeyUse,
  keyUse,
  CHUNK_BYTES,
  CRYPTO_VERSION,
  IntegrityError,
  KDF_ACCEPTED_MAX,
  WrongPassphraseError,
  createEnvelope,
  requireRequestedBackup,
} from '../../../src/client/envelope-core.js';
export type { Primitives } from '../../../src/client/envelope-primitives.js';
export type { OpenedDek } from '../../../src/client/envelope-dek.js';
export type { KdfParams, VaultFields } from '../../../src/client/envelope-vault.js';
/** The provider-generic reader, for the self-test's runs on other primitives (one import path keeps one chunk). */
export { CoreSecretStreamReader };

export const ready: Promise<void> = sodium.ready;

type StreamState = ReturnType<typeof sodium.crypto_secretstream_xchacha20poly1305_init_pull>;

/**
 * The envelope's primitives on libsodium.js: its functions return new arrays, copied into the envelope's buffers
 * (an extra copy the WebAssembly heap boundary makes anyway).
 */
export const webPrimitives: Primitives = {
  alloc: (length) => new Uint8Array(length),
  secureAlloc: (length) => new Uint8Array(length),
  wipe: (bytes) => sodium.memzero(bytes),
  random: (into) => into.set(sodium.randombytes_buf(into.length)),
  async argon2id(key, password, salt, opslimit, memlimit) {
    const derived = sodium.crypto_pwhash(key.length, password, salt, opslimit, memlimit, sodium.crypto_pwhash_ALG_ARGON2ID13);
    key.set(derived);
    sodium.memzero(derived);
  },
  aeadEncrypt(into, plaintext, ad, nonce, key) {
    into.set(sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, ad, null, nonce, key));
  },
  aeadDecrypt(into, ciphertext, ad, nonce, key) {
    let plaintext: Uint8Array;
    try {
      plaintext = sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(null, ciphertext, ad, nonce, key);
    } catch {
      return false;
    }
    into.set(plaintext);
    sodium.memzero(plaintext);
    return true;
  },
  streamInitPush(header, key) {
    const { state, header: made } = sodium.crypto_secretstream_xchacha20poly1305_init_push(key);
    header.set(made);
    return state;
  },
  streamPush(state, into, message, tag) {
    into.set(sodium.crypto_secretstream_xchacha20poly1305_push(state as StreamState, message, null, tag));
  },
  streamInitPull: (header, key) => sodium.crypto_secretstream_xchacha20poly1305_init_pull(header, key),
  streamPull(state, into, frame) {
    let result: { message: Uint8Array; tag: number } | false;
    try {
      result = sodium.crypto_secretstream_xchacha20poly1305_pull(state as StreamState, frame, null);
    } catch {
      return undefined;
    }
    if (!result) return undefined;
    into.set(result.message);
    return result.tag;
  },
  // libsodium.js keeps the state inside the WebAssembly heap; nothing of it is reachable from here.
  streamWipe: () => {},
  toBase64: (bytes) => sodium.to_base64(bytes, sodium.base64_variants.ORIGINAL),
  fromBase64: (value) => (value === '' ? new Uint8Array(0) : sodium.from_base64(value, sodium.base64_variants.ORIGINAL)),
  kdfDerive(into, subkeyId, context, key) {
    const subkey = sodium.crypto_kdf_derive_from_key(into.length, subkeyId, context, key);
    into.set(subkey);
    sodium.memzero(subkey);
  },
  sha256: (into, message) => into.set(sodium.crypto_hash_sha256(message)),
};

export const {
  wipe,
  fromBase64,
  deriveKek,
  newKdfParams,
  wrapMasterKey,
  unwrapMasterKey,
  keyMaterialOf,
  masterKeys,
  wrapDek,
  unwrapDek,
  openDek,
  keyFingerprints,
  deriveRecipient,
  parseRecipient,
  sealDek,
  sealMetadataJson,
  openMetadata,
} = createEnvelope(webPrimitives);

/** The archive secretstream reader (src/client/envelope-core.ts) on libsodium.js. */
export class SecretStreamReader extends CoreSecretStreamReader<Uint8Array> {
  constructor(key: Uint8Array) {
    super(webPrimitives, key);
  }
}

export const toHex = (bytes: Uint8Array): string => sodium.to_hex(bytes);
export const fromHex = (hex: string): Uint8Array => sodium.from_hex(hex);

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
