/**
 * The part of sodium-native (libsodium bindings, v5) that the client uses. The package ships no types;
 * these signatures follow its index.js. Byte arguments are any Uint8Array (Buffers included).
 */
declare module 'sodium-native' {
  type Bytes = Uint8Array;

  namespace sodium {
    function sodium_malloc(size: number): Buffer;
    function sodium_memzero(buf: Bytes): void;
    function randombytes_buf(buf: Bytes): void;

    const crypto_pwhash_ALG_ARGON2ID13: number;
    const crypto_pwhash_SALTBYTES: number;
    const crypto_pwhash_OPSLIMIT_MIN: number;
    const crypto_pwhash_OPSLIMIT_MAX: number;
    const crypto_pwhash_MEMLIMIT_MIN: number;
    const crypto_pwhash_MEMLIMIT_MAX: number;
    const crypto_pwhash_OPSLIMIT_INTERACTIVE: number;
    const crypto_pwhash_MEMLIMIT_INTERACTIVE: number;
    const crypto_pwhash_OPSLIMIT_MODERATE: number;
    const crypto_pwhash_MEMLIMIT_MODERATE: number;
    const crypto_pwhash_OPSLIMIT_SENSITIVE: number;
    const crypto_pwhash_MEMLIMIT_SENSITIVE: number;
    function crypto_pwhash_async(out: Bytes, passwd: Bytes, salt: Bytes, opslimit: number, memlimit: number, alg: number): Promise<void>;

    const crypto_aead_xchacha20poly1305_ietf_KEYBYTES: number;
    const crypto_aead_xchacha20poly1305_ietf_NPUBBYTES: number;
    const crypto_aead_xchacha20poly1305_ietf_ABYTES: number;
    function crypto_aead_xchacha20poly1305_ietf_encrypt(c: Bytes, m: Bytes, ad: Bytes | null, nsec: null, npub: Bytes, k: Bytes): number;
    /** Throws when the tag does not verify. */
    function crypto_aead_xchacha20poly1305_ietf_decrypt(m: Bytes, nsec: null, c: Bytes, ad: Bytes | null, npub: Bytes, k: Bytes): number;

    function crypto_kdf_derive_from_key(subkey: Bytes, subkeyId: number, ctx: Bytes, key: Bytes): void;
    function crypto_hash_sha256(out: Bytes, input: Bytes): void;

    const crypto_secretstream_xchacha20poly1305_STATEBYTES: number;
    const crypto_secretstream_xchacha20poly1305_HEADERBYTES: number;
    const crypto_secretstream_xchacha20poly1305_KEYBYTES: number;
    const crypto_secretstream_xchacha20poly1305_ABYTES: number;
    const crypto_secretstream_xchacha20poly1305_TAG_MESSAGE: number;
    const crypto_secretstream_xchacha20poly1305_TAG_FINAL: number;
    function crypto_secretstream_xchacha20poly1305_init_push(state: Bytes, header: Bytes, k: Bytes): void;
    function crypto_secretstream_xchacha20poly1305_init_pull(state: Bytes, header: Bytes, k: Bytes): void;
    function crypto_secretstream_xchacha20poly1305_push(state: Bytes, c: Bytes, m: Bytes, ad: Bytes | null, tag: number): number;
    /** Throws when the chunk does not verify; writes the chunk's tag into `tag` (1 byte). */
    function crypto_secretstream_xchacha20poly1305_pull(state: Bytes, m: Bytes, tag: Bytes, c: Bytes, ad: Bytes | null): number;
  }
  export = sodium;
}
