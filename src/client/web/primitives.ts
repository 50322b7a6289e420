/**
 * The envelope's primitives (src/client/envelope-primitives.ts) on libsodium compiled to WebAssembly
 * (libsodium-wrappers-sumo: crypto_pwhash, XChaCha20-Poly1305, secretstream): the browser entry's and the console's
 * one copy. Environment-neutral (no DOM, no Node API): a page, a worker and a Node test all use it; await `ready`
 * before the first call.
 */
import sodium from 'libsodium-wrappers-sumo';
import type { Primitives } from '../envelope-primitives.js';

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
