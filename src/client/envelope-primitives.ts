/**
 * The libsodium primitives the envelope (./envelope-core.ts) is written against, and the AEAD box every part of it
 * seals with: XChaCha20-Poly1305-IETF under a 24-byte nonce, outputs in buffers the provider allocates.
 */
import { IntegrityError } from './envelope-format.js';

export const KEY_BYTES = 32;
export const SALT_BYTES = 16; // crypto_pwhash_SALTBYTES
export const NONCE_BYTES = 24; // crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
export const AEAD_ABYTES = 16; // crypto_aead_xchacha20poly1305_ietf_ABYTES

/**
 * The libsodium functions the envelope is made of, in libsodium's own shape: outputs are written into buffers the
 * caller allocated with `alloc`/`secureAlloc`. `B` is the provider's byte type (Buffer in Node).
 */
export interface Primitives<B extends Uint8Array = Uint8Array> {
  /** A buffer the caller fills completely (its initial contents are unspecified). */
  alloc(length: number): B;
  /** A zeroed buffer for secret keys (guarded memory, sodium_malloc, where the runtime has it). */
  secureAlloc(length: number): B;
  /** sodium_memzero. */
  wipe(bytes: Uint8Array): void;
  /** randombytes_buf. */
  random(into: Uint8Array): void;
  /** crypto_pwhash(ALG_ARGON2ID13) into `key`; may run off the calling thread. */
  argon2id(key: B, password: Uint8Array, salt: Uint8Array, opslimit: number, memlimit: number): Promise<void>;
  /** crypto_aead_xchacha20poly1305_ietf_encrypt: `into` is plaintext + AEAD_ABYTES long. */
  aeadEncrypt(into: B, plaintext: Uint8Array, ad: Uint8Array, nonce: Uint8Array, key: Uint8Array): void;
  /** crypto_aead_xchacha20poly1305_ietf_decrypt: false when the tag does not verify. */
  aeadDecrypt(into: B, ciphertext: Uint8Array, ad: Uint8Array, nonce: Uint8Array, key: Uint8Array): boolean;
  /** crypto_secretstream_xchacha20poly1305_init_push: writes the header, returns the state. */
  streamInitPush(header: B, key: Uint8Array): StreamState;
  /** crypto_secretstream_xchacha20poly1305_push (no AD): `into` is message + STREAM_ABYTES long. */
  streamPush(state: StreamState, into: B, message: Uint8Array, tag: number): void;
  /** crypto_secretstream_xchacha20poly1305_init_pull. */
  streamInitPull(header: Uint8Array, key: Uint8Array): StreamState;
  /** crypto_secretstream_xchacha20poly1305_pull (no AD): the frame's tag, or undefined when it does not verify. */
  streamPull(state: StreamState, into: B, frame: Uint8Array): number | undefined;
  /** Forgets a stream state (zeroes it where the provider holds it). */
  streamWipe(state: StreamState): void;
  /** Standard padded base64 (sodium_bin2base64 ORIGINAL). */
  toBase64(bytes: Uint8Array): string;
  /** The bytes of canonical padded base64 (already checked by the caller). */
  fromBase64(value: string): B;
  /** crypto_kdf_derive_from_key (BLAKE2b): `into` is the subkey (16–64 bytes); `context` is 8 ASCII characters. */
  kdfDerive(into: B, subkeyId: number, context: string, key: Uint8Array): void;
  /** crypto_hash_sha256: `into` is 32 bytes. */
  sha256(into: B, message: Uint8Array): void;
}

/** A provider's secretstream state, opaque to the envelope. */
export type StreamState = unknown;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
export const utf8 = new TextEncoder();

/** A 4-byte format magic of three ASCII letters and a version digit ("ckr1", "cxw1"), or null. */
export function magicOf(bytes: Uint8Array): string | null {
  if (bytes.length < 4) return null;
  const text = String.fromCharCode(...bytes.subarray(0, 4));
  return /^[a-z]{3}[0-9]$/.test(text) ? text : null;
}

export function randomBytes<B extends Uint8Array>(p: Primitives<B>, length: number): B {
  const bytes = p.alloc(length);
  p.random(bytes);
  return bytes;
}

/** Strict decoding of a server-provided field: anything but canonical padded base64 is an integrity failure. */
export function decodeBase64<B extends Uint8Array>(p: Primitives<B>, value: string | null | undefined, field: string): B {
  if (typeof value !== 'string' || !BASE64.test(value)) throw new IntegrityError(`${field} is missing or not base64`);
  return p.fromBase64(value);
}

/** An AEAD box under `key` with additional data `ad`, under a new (or the given) nonce. */
export function seal<B extends Uint8Array>(
  p: Primitives<B>,
  key: Uint8Array,
  plaintext: Uint8Array,
  ad: string,
  nonce: Uint8Array = randomBytes(p, NONCE_BYTES),
) {
  if (nonce.length !== NONCE_BYTES) throw new Error(`nonce must be ${NONCE_BYTES} bytes`);
  const ciphertext = p.alloc(plaintext.length + AEAD_ABYTES);
  p.aeadEncrypt(ciphertext, plaintext, utf8.encode(ad), nonce, key);
  return { ciphertext, nonce };
}

/** Opens an AEAD box (a key: into a secure buffer); throws IntegrityError(`what`) when it does not verify. */
export function open<B extends Uint8Array>(
  p: Primitives<B>,
  key: Uint8Array,
  ciphertext: Uint8Array,
  nonce: Uint8Array,
  ad: string,
  what: string,
  secure = false,
): B {
  if (nonce.length !== NONCE_BYTES || ciphertext.length < AEAD_ABYTES) throw new IntegrityError(what);
  const length = ciphertext.length - AEAD_ABYTES;
  const plaintext = secure ? p.secureAlloc(length) : p.alloc(length);
  if (!p.aeadDecrypt(plaintext, ciphertext, utf8.encode(ad), nonce, key)) {
    p.wipe(plaintext);
    throw new IntegrityError(what);
  }
  return plaintext;
}

/** The envelope's general operations: random bytes, fresh keys, wiping, strict base64. */
export function basicOperations<B extends Uint8Array>(p: Primitives<B>) {
  return {
    randomBytes: (length: number): B => randomBytes(p, length),
    /** A fresh 32-byte key in a secure buffer. */
    newKey(): B {
      const key = p.secureAlloc(KEY_BYTES);
      p.random(key);
      return key;
    },
    wipe(...buffers: (Uint8Array | undefined)[]): void {
      for (const buffer of buffers) if (buffer) p.wipe(buffer);
    },
    fromBase64: (value: string | null | undefined, field: string): B => decodeBase64(p, value, field),
  };
}
