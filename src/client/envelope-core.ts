/**
 * Crypto envelope v1 (docs/crypto.md), written once against a small set of libsodium primitives. The CLI binds it
 * to sodium-native (src/client/envelope.ts), the console page to libsodium in WebAssembly
 * (console/src/crypto/envelope.ts); this module imports neither, nor any Node or DOM API.
 *
 *   KEK         = Argon2id13(passphrase NFC UTF-8, salt 16 B, opslimit, memlimit) → 32 B
 *   master key  = 32 random bytes, XChaCha20-Poly1305-IETF(KEK, nonce 24 B, AD "coffer/v1/master"); after
 *                 `coffer rekey` the plaintext is a keyring "ckr1" ‖ n ‖ n × 32 B keys, current first. The core's
 *                 `masterKey` arguments are that plaintext (either form): new material uses the current key,
 *                 reading tries every key
 *   DEK         = 32 random bytes per backup, XChaCha20-Poly1305-IETF(master, nonce, AD "coffer/v1/dek/<id>")
 *   metadata    = JSON, XChaCha20-Poly1305-IETF(DEK, nonce, AD "coffer/v1/metadata/<id>")
 *   archive     = secretstream XChaCha20-Poly1305(DEK): 24 B header, then 64 KiB plaintext chunks, each
 *                 + 17 B; every chunk TAG_MESSAGE except the last, TAG_FINAL (truncation is detected)
 *   recipient   = X-Wing key pair from seed crypto_kdf_derive_from_key(32, 1, "cofferxw", master key);
 *                 a DEK sealed to it: "cxw1" ‖ fingerprint 8 B ‖ X-Wing ct 1120 B ‖ XChaCha20-Poly1305(ss, nonce,
 *                 AD "coffer/v1/sealed-dek/<id>/<fingerprint>") 48 B
 *
 * Binary values travel as standard padded base64. X-Wing (@noble/post-quantum) and Bech32m (@scure/base) are
 * pure JavaScript, the same code on both providers.
 */
import { ml_kem768_x25519 as xwing } from '@noble/post-quantum/hybrid.js';
import { bech32m } from '@scure/base';
import type { BackupAccountEnvelopeBody } from '../contract/schemas.js';
import {
  AD,
  KEYRING,
  RECIPIENT,
  ARCHIVE_FORMATS,
  type BackupMetadata,
  CHUNK_BYTES,
  COMPRESSIONS,
  CRYPTO_VERSION,
  DEFAULT_KDF_PROFILE,
  IntegrityError,
  isPlainName,
  KDF_ACCEPTED_MAX,
  KDF_ACCEPTED_MIN,
  type KdfProfile,
  NewerFormatError,
  requireRequestedBackup,
  WrongPassphraseError,
} from './envelope-format.js';
import { fingerprintText, isSealedDek, SEALED_DEK_BYTES, WRAPPED_DEK_BYTES } from './key-usage.js';

export { dekForm, type DekForm, fingerprintText, keyUse, type KeyUse } from './key-usage.js';
export { AD, KEYRING, RECIPIENT, type BackupMetadata, CHUNK_BYTES, CRYPTO_VERSION, DEFAULT_KDF_PROFILE, IntegrityError, KDF_ACCEPTED_MAX, type KdfProfile, NewerFormatError, requireRequestedBackup, WrongPassphraseError };

export const KEY_BYTES = 32;
export const SALT_BYTES = 16; // crypto_pwhash_SALTBYTES
export const NONCE_BYTES = 24; // crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
export const AEAD_ABYTES = 16; // crypto_aead_xchacha20poly1305_ietf_ABYTES
export const STREAM_HEADER_BYTES = 24; // crypto_secretstream_xchacha20poly1305_HEADERBYTES
export const STREAM_ABYTES = 17; // crypto_secretstream_xchacha20poly1305_ABYTES
export const TAG_MESSAGE = 0; // crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
export const TAG_FINAL = 3; // crypto_secretstream_xchacha20poly1305_TAG_FINAL
const FRAME_BYTES = CHUNK_BYTES + STREAM_ABYTES;

const MALFORMED_KEYRING = 'the vault key material is neither a 32-byte master key nor a keyring';

/** The length of the plaintext under the KEK: a legacy master key (n = 0) or a keyring of n keys. */
const keyringBytes = (n: number) => KEYRING.headerBytes + n * KEY_BYTES;
/** The largest wrapped material a client unwraps (the server's cap on decoded binary fields). */
const MAX_WRAPPED_MATERIAL_BYTES = 4096;

/** A 4-byte format magic of three ASCII letters and a version digit ("ckr1", "cxw1"), or null. */
function magicOf(bytes: Uint8Array): string | null {
  if (bytes.length < 4) return null;
  const text = String.fromCharCode(...bytes.subarray(0, 4));
  return /^[a-z]{3}[0-9]$/.test(text) ? text : null;
}

/**
 * What an opened (authenticated) vault plaintext that masterKeys refused is: a keyring of a later version ("ckr2"…),
 * or a "ckr1" ring longer than this version allows, was written by a newer client; a "ckr1" ring whose count and
 * length disagree by a faulty one; anything else is a form this version does not know (a newer or a faulty client).
 */
function unreadableMaterial(material: Uint8Array): IntegrityError {
  const magic = magicOf(material);
  const n = material[KEYRING.magic.length] ?? 0;
  const longerRing = magic === KEYRING.magic && n > KEYRING.maxKeys && material.length === keyringBytes(n);
  if (magic !== null && magic.startsWith(KEYRING.magic.slice(0, 3)) && (magic !== KEYRING.magic || longerRing)) {
    return new NewerFormatError(
      `the vault's key material is a keyring of a form this coffer does not read (${JSON.stringify(magic)}, ${material.length} bytes): ` +
        'it was made by a newer coffer; upgrade coffer to open this vault',
    );
  }
  if (magic === KEYRING.magic) return new IntegrityError(MALFORMED_KEYRING);
  return new NewerFormatError(`${MALFORMED_KEYRING} this coffer knows (${material.length} bytes): it was made by a newer coffer, or a faulty one; upgrade coffer`);
}

/**
 * The master keys of vault key material, newest (current) first, as views into it: exactly 32 bytes is one legacy
 * master key; anything else must be "ckr1" ‖ n (1..64) ‖ n × 32 bytes. IntegrityError otherwise.
 */
export function masterKeys(material: Uint8Array): Uint8Array[] {
  if (material.length === KEY_BYTES) return [material];
  const n = material[KEYRING.magic.length] ?? 0;
  const magicOk = material.length >= KEYRING.headerBytes && KEYRING.magic.split('').every((c, i) => material[i] === c.charCodeAt(0));
  if (!magicOk || n < 1 || n > KEYRING.maxKeys || material.length !== keyringBytes(n)) throw new IntegrityError(MALFORMED_KEYRING);
  return Array.from({ length: n }, (_, i) => material.subarray(keyringBytes(i), keyringBytes(i + 1)));
}

/** wrappedDek sizes: the master-key-wrapped form, and the form sealed to a recipient (docs/crypto.md §2, §2b). */
export { SEALED_DEK_BYTES, WRAPPED_DEK_BYTES };
/** The X-Wing encapsulation randomness (ML-KEM coins ‖ X25519 ephemeral secret). */
export const XWING_ESEED_BYTES = 64;

/** A recipient string that is not one (typo, truncation, another format): the user's input, not the server's. */
export class RecipientFormatError extends Error {
  override readonly name = 'RecipientFormatError';
}

/** A backup's DEK and which key of the vault's ring opened it (0 = the current key), in which form it was stored. */
export interface OpenedDek<B extends Uint8Array = Uint8Array> {
  dek: B;
  keyIndex: number;
  form: 'master' | 'sealed';
}

/** A public recipient: what a backup host needs to seal a backup's DEK. */
export interface Recipient {
  publicKey: Uint8Array;
  /** "xxxx-xxxx-xxxx-xxxx": the first 8 bytes of SHA-256(publicKey), lowercase hex. */
  fingerprint: string;
  /** Bech32m, HRP "coffer". */
  text: string;
}

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

export interface KdfLimits {
  opslimit: number;
  memlimit: number;
}

export interface KdfParams extends KdfLimits {
  salt: Uint8Array;
}

/** Argon2id cost profiles: libsodium's named limits (crypto_pwhash_{OPS,MEM}LIMIT_*). New vaults use `moderate`. */
export const KDF_PROFILES = {
  min: { opslimit: 1, memlimit: 8192 },
  interactive: { opslimit: 2, memlimit: 67_108_864 },
  moderate: { opslimit: 3, memlimit: 268_435_456 },
  sensitive: { opslimit: 4, memlimit: 1_073_741_824 },
} as const satisfies Record<KdfProfile, KdfLimits>;
export const isKdfProfile = (value: string): value is KdfProfile => Object.hasOwn(KDF_PROFILES, value);

/** A BackupAccountEnvelope: the bootstrap/rotate body, and the vault fields of an initialized BackupAccount. */
export type VaultMaterial = BackupAccountEnvelopeBody;

/** The vault fields of a BackupAccount as the server answers them (null before bootstrap). */
export interface VaultFields {
  cryptoVersion: string | null;
  kdf: { salt: string; opslimit: number; memlimit: number } | null;
  wrappedMasterKey: string | null;
  wrappedMasterKeyNonce: string | null;
}

export interface WrappedDek {
  wrappedDek: string;
  wrappedDekNonce: string;
}

export interface SealedMetadata {
  encryptedMetadata: string;
  encryptedMetadataNonce: string;
}

/** Exact ciphertext size for `plainBytes` of stream input: header + one 17-byte overhead per chunk (≥ 1 chunk). */
export function ciphertextSize(plainBytes: number): number {
  const chunks = Math.max(1, Math.ceil(plainBytes / CHUNK_BYTES));
  return STREAM_HEADER_BYTES + plainBytes + chunks * STREAM_ABYTES;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const utf8 = new TextEncoder();

function checkKdf({ salt, opslimit, memlimit }: KdfParams): void {
  if (salt.length !== SALT_BYTES) throw new IntegrityError(`the vault salt must be ${SALT_BYTES} bytes`);
  if (!Number.isInteger(opslimit) || opslimit < KDF_ACCEPTED_MIN.opslimit || opslimit > KDF_ACCEPTED_MAX.opslimit) {
    throw new IntegrityError(`the vault's Argon2id opslimit (${opslimit}) is outside the accepted range`);
  }
  if (!Number.isInteger(memlimit) || memlimit < KDF_ACCEPTED_MIN.memlimit || memlimit > KDF_ACCEPTED_MAX.memlimit) {
    throw new IntegrityError(`the vault's Argon2id memlimit (${memlimit}) is outside the accepted range`);
  }
}

function parseMetadata(plain: Uint8Array): BackupMetadata {
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
    (ARCHIVE_FORMATS as unknown[]).includes(m.archive) &&
    (COMPRESSIONS as unknown[]).includes(m.compression) &&
    (m.archive !== 'raw' || isPlainName(m.name)) &&
    m.chunkBytes === CHUNK_BYTES &&
    typeof m.plaintextSha256 === 'string' &&
    /^[0-9a-f]{64}$/.test(m.plaintextSha256) &&
    Number.isSafeInteger(m.plaintextSizeBytes) &&
    Number.isSafeInteger(m.ciphertextSizeBytes);
  if (!ok) throw new IntegrityError('the backup metadata is not coffer-archive/v1 metadata');
  return m as BackupMetadata;
}

/** The envelope's operations on one provider's primitives. */
export function createEnvelope<B extends Uint8Array>(p: Primitives<B>) {
  function randomBytes(length: number): B {
    const bytes = p.alloc(length);
    p.random(bytes);
    return bytes;
  }

  /** A fresh 32-byte key in a secure buffer. */
  function newKey(): B {
    const key = p.secureAlloc(KEY_BYTES);
    p.random(key);
    return key;
  }

  function wipe(...buffers: (Uint8Array | undefined)[]): void {
    for (const buffer of buffers) if (buffer) p.wipe(buffer);
  }

  /** Strict decoding of a server-provided field: anything but canonical padded base64 is an integrity failure. */
  function fromBase64(value: string | null | undefined, field: string): B {
    if (typeof value !== 'string' || !BASE64.test(value)) throw new IntegrityError(`${field} is missing or not base64`);
    return p.fromBase64(value);
  }

  function newKdfParams(profile: KdfProfile = DEFAULT_KDF_PROFILE): KdfParams {
    return { salt: randomBytes(SALT_BYTES), ...KDF_PROFILES[profile] };
  }

  /** KEK = Argon2id13(NFC UTF-8 passphrase, salt, opslimit, memlimit), 32 bytes in a secure buffer. */
  async function deriveKek(passphrase: string, kdf: KdfParams): Promise<B> {
    checkKdf(kdf);
    const normalized = passphrase.normalize('NFC');
    // At most 3 UTF-8 bytes per UTF-16 code unit; the passphrase bytes never leave secure memory.
    const password = p.secureAlloc(normalized.length * 3);
    const kek = p.secureAlloc(KEY_BYTES);
    try {
      const { written } = utf8.encodeInto(normalized, password);
      await p.argon2id(kek, password.subarray(0, written), kdf.salt, kdf.opslimit, kdf.memlimit);
    } catch (error) {
      p.wipe(kek);
      throw error;
    } finally {
      p.wipe(password);
    }
    return kek;
  }

  function seal(key: Uint8Array, plaintext: Uint8Array, ad: string, nonce: Uint8Array = randomBytes(NONCE_BYTES)) {
    if (nonce.length !== NONCE_BYTES) throw new Error(`nonce must be ${NONCE_BYTES} bytes`);
    const ciphertext = p.alloc(plaintext.length + AEAD_ABYTES);
    p.aeadEncrypt(ciphertext, plaintext, utf8.encode(ad), nonce, key);
    return { ciphertext, nonce };
  }

  /** Opens an AEAD box (a key: into a secure buffer); throws IntegrityError(`what`) when it does not verify. */
  function open(key: Uint8Array, ciphertext: Uint8Array, nonce: Uint8Array, ad: string, what: string, secure = false): B {
    if (nonce.length !== NONCE_BYTES || ciphertext.length < AEAD_ABYTES) throw new IntegrityError(what);
    const length = ciphertext.length - AEAD_ABYTES;
    const plaintext = secure ? p.secureAlloc(length) : p.alloc(length);
    if (!p.aeadDecrypt(plaintext, ciphertext, utf8.encode(ad), nonce, key)) {
      p.wipe(plaintext);
      throw new IntegrityError(what);
    }
    return plaintext;
  }

  /** Wraps the key material (a master key or a keyring, as is) under a KEK from `passphrase` with new (or given) KDF parameters. */
  async function wrapMasterKey(
    masterKey: Uint8Array,
    passphrase: string,
    kdf: KdfParams = newKdfParams(),
    nonce?: Uint8Array,
  ): Promise<VaultMaterial> {
    masterKeys(masterKey);
    const kek = await deriveKek(passphrase, kdf);
    try {
      const box = seal(kek, masterKey, AD.master, nonce);
      return {
        cryptoVersion: CRYPTO_VERSION,
        kdf: { salt: p.toBase64(kdf.salt), opslimit: kdf.opslimit, memlimit: kdf.memlimit },
        wrappedMasterKey: p.toBase64(box.ciphertext),
        wrappedMasterKeyNonce: p.toBase64(box.nonce),
      };
    } finally {
      wipe(kek);
    }
  }

  /**
   * The key material (a legacy master key or a keyring, checked), in a secure buffer; WrongPassphraseError
   * on a wrong passphrase or altered material.
   */
  async function unwrapMasterKey(vault: VaultFields, passphrase: string): Promise<B> {
    if (vault.cryptoVersion !== CRYPTO_VERSION) {
      throw new IntegrityError(`unsupported vault crypto version ${JSON.stringify(vault.cryptoVersion)}`);
    }
    if (!vault.kdf) throw new IntegrityError('the vault has no key-derivation parameters');
    const kdf = { salt: fromBase64(vault.kdf.salt, 'kdf.salt'), opslimit: vault.kdf.opslimit, memlimit: vault.kdf.memlimit };
    const wrapped = fromBase64(vault.wrappedMasterKey, 'wrappedMasterKey');
    const nonce = fromBase64(vault.wrappedMasterKeyNonce, 'wrappedMasterKeyNonce');
    // Any length the server accepts is opened: the AEAD tag tells a wrong passphrase from a form only a newer coffer reads.
    if (wrapped.length <= AEAD_ABYTES || wrapped.length > MAX_WRAPPED_MATERIAL_BYTES) throw new WrongPassphraseError();
    const kek = await deriveKek(passphrase, kdf);
    let material: B;
    try {
      material = open(kek, wrapped, nonce, AD.master, 'the vault key material', true);
    } catch {
      throw new WrongPassphraseError();
    } finally {
      wipe(kek);
    }
    try {
      masterKeys(material);
    } catch {
      const error = unreadableMaterial(material);
      wipe(material);
      throw error;
    }
    return material;
  }

  /** New key material: a fresh random master key in front of the given material's keys (a keyring), in a secure buffer. */
  function addMasterKey(material: Uint8Array): B {
    const keys = masterKeys(material);
    if (keys.length >= KEYRING.maxKeys) throw new RangeError(`the keyring already holds the maximum of ${KEYRING.maxKeys} keys`);
    const ring = p.secureAlloc(keyringBytes(keys.length + 1));
    ring.set(utf8.encode(KEYRING.magic), 0);
    ring[KEYRING.magic.length] = keys.length + 1;
    p.random(ring.subarray(keyringBytes(0), keyringBytes(1)));
    keys.forEach((key, i) => ring.set(key, keyringBytes(i + 1)));
    return ring;
  }

  /** Key material from master keys, current first: one key is the legacy 32-byte form, more a keyring (secure buffer). */
  function keyMaterialOf(keys: readonly Uint8Array[]): B {
    if (keys.length < 1 || keys.length > KEYRING.maxKeys || keys.some((key) => key.length !== KEY_BYTES)) {
      throw new RangeError(`a vault holds 1 to ${KEYRING.maxKeys} master keys of ${KEY_BYTES} bytes`);
    }
    if (keys.length === 1) {
      const key = p.secureAlloc(KEY_BYTES);
      key.set(keys[0]!);
      return key;
    }
    const ring = p.secureAlloc(keyringBytes(keys.length));
    ring.set(utf8.encode(KEYRING.magic), 0);
    ring[KEYRING.magic.length] = keys.length;
    keys.forEach((key, i) => ring.set(key, keyringBytes(i)));
    return ring;
  }

  /** Wraps a new backup's DEK with the current master key (the first of a keyring). */
  function wrapDek(masterKey: Uint8Array, backupId: string, dek: Uint8Array, nonce?: Uint8Array): WrappedDek {
    const box = seal(masterKeys(masterKey)[0]!, dek, AD.dek(backupId), nonce);
    return { wrappedDek: p.toBase64(box.ciphertext), wrappedDekNonce: p.toBase64(box.nonce) };
  }

  /** The first 8 bytes of SHA-256(public key). */
  function fingerprintBytes(publicKey: Uint8Array): Uint8Array {
    const digest = p.alloc(32);
    p.sha256(digest, publicKey);
    return digest.slice(0, RECIPIENT.fingerprintBytes);
  }

  function recipientOf(publicKey: Uint8Array): Recipient {
    return {
      publicKey,
      fingerprint: fingerprintText(fingerprintBytes(publicKey)),
      text: bech32m.encode(RECIPIENT.hrp, bech32m.toWords(publicKey), false),
    };
  }

  /** The X-Wing seed of the vault's recipient, in a secure buffer: crypto_kdf_derive_from_key(32, 1, "cofferxw", master key). */
  function recipientSeed(masterKey: Uint8Array): B {
    if (masterKey.length !== KEY_BYTES) throw new Error(`the master key must be ${KEY_BYTES} bytes`);
    const seed = p.secureAlloc(KEY_BYTES);
    p.kdfDerive(seed, RECIPIENT.kdfSubkeyId, RECIPIENT.kdfContext, masterKey);
    return seed;
  }

  /** The vault's recipient (public): X-Wing KeyGen from the seed derived from the current master key. */
  function deriveRecipient(masterKey: Uint8Array): Recipient {
    const seed = recipientSeed(masterKeys(masterKey)[0]!);
    try {
      return recipientOf(xwing.getPublicKey(seed));
    } finally {
      p.wipe(seed);
    }
  }

  /**
   * A recipient string as the user gave it (surrounding white space ignored, all lower or all upper case);
   * RecipientFormatError with its own reason for each fault, in this order: not "coffer1…", mixed case, a Bech32m
   * checksum that does not match, a payload that is not 1,946 characters (1,216 bytes), non-zero padding bits, a key
   * that fails ML-KEM's modulus check. The one reader of every place a recipient is given (docs/crypto.md §2b).
   */
  function parseRecipient(input: string): Recipient {
    const text = input.trim();
    const prefix = `${RECIPIENT.hrp}1`;
    if (!text.toLowerCase().startsWith(prefix)) {
      throw new RecipientFormatError(`not a Coffer recipient: it must start with "${prefix}" (\`coffer recipient\` prints it)`);
    }
    if (text !== text.toLowerCase() && text !== text.toUpperCase()) {
      throw new RecipientFormatError('the recipient string mixes upper and lower case: write it all in one case, as `coffer recipient` prints it');
    }
    let words: number[];
    try {
      const decoded = bech32m.decode(text as `${string}1${string}`, false);
      if (decoded.prefix !== RECIPIENT.hrp) throw new Error('prefix');
      words = decoded.words;
    } catch {
      throw new RecipientFormatError(
        'the recipient string is damaged: its Bech32m checksum does not match (a character mistyped, missing or added); ' +
          'copy it again from `coffer recipient`',
      );
    }
    // 1,216 bytes are 1,946 five-bit words; the last one's low 2 bits are padding, which Bech32m requires to be zero.
    const keyWords = Math.ceil((RECIPIENT.publicKeyBytes * 8) / 5);
    if (words.length !== keyWords) {
      throw new RecipientFormatError(
        `the recipient holds ${words.length} data characters (${Math.floor((words.length * 5) / 8)} bytes), not an X-Wing public key ` +
          `(${keyWords} characters, ${RECIPIENT.publicKeyBytes} bytes)`,
      );
    }
    const paddingBits = keyWords * 5 - RECIPIENT.publicKeyBytes * 8;
    if ((words[keyWords - 1]! & ((1 << paddingBits) - 1)) !== 0) {
      throw new RecipientFormatError(
        `the recipient string's last character has non-zero padding bits: its checksum matches, but coffer never writes it so ` +
          '(made by hand or by another tool); copy it again from `coffer recipient`',
      );
    }
    const publicKey = bech32m.fromWords(words);
    // ML-KEM's encapsulation-key check (FIPS 203 §7.2) now, not after the upload when the DEK is sealed.
    try {
      const trial = xwing.encapsulate(publicKey, new Uint8Array(XWING_ESEED_BYTES));
      p.wipe(trial.sharedSecret);
    } catch {
      throw new RecipientFormatError('the recipient is not a valid X-Wing public key (its ML-KEM part fails the modulus check)');
    }
    return recipientOf(publicKey);
  }

  /**
   * Seals a backup's DEK to a recipient (no master key needed): wrappedDek = "cxw1" ‖ fingerprint ‖ X-Wing ct ‖
   * XChaCha20-Poly1305(ss, nonce, AD "coffer/v1/sealed-dek/<id>/<fingerprint>", DEK). `eseed` fixes the
   * encapsulation (test vectors only).
   */
  function sealDek(recipient: Recipient, backupId: string, dek: Uint8Array, nonce?: Uint8Array, eseed?: Uint8Array): WrappedDek {
    if (recipient.publicKey.length !== RECIPIENT.publicKeyBytes) throw new RecipientFormatError('not an X-Wing public key');
    const fingerprint = fingerprintBytes(recipient.publicKey);
    const coins = eseed ?? randomBytes(XWING_ESEED_BYTES);
    if (coins.length !== XWING_ESEED_BYTES) throw new Error(`eseed must be ${XWING_ESEED_BYTES} bytes`);
    let encapsulated: { cipherText: Uint8Array; sharedSecret: Uint8Array };
    try {
      encapsulated = xwing.encapsulate(recipient.publicKey, coins);
    } catch {
      throw new RecipientFormatError('the recipient is not a valid X-Wing public key');
    } finally {
      if (!eseed) p.wipe(coins);
    }
    const { cipherText, sharedSecret } = encapsulated;
    try {
      const box = seal(sharedSecret, dek, AD.sealedDek(backupId, fingerprintText(fingerprint)), nonce);
      const sealed = p.alloc(SEALED_DEK_BYTES);
      sealed.set(utf8.encode(RECIPIENT.magic), 0);
      sealed.set(fingerprint, RECIPIENT.magic.length);
      sealed.set(cipherText, RECIPIENT.magic.length + RECIPIENT.fingerprintBytes);
      sealed.set(box.ciphertext, SEALED_DEK_BYTES - WRAPPED_DEK_BYTES);
      return { wrappedDek: p.toBase64(sealed), wrappedDekNonce: p.toBase64(box.nonce) };
    } finally {
      p.wipe(sharedSecret);
    }
  }

  /** The key of the ring whose recipient the DEK was sealed to (the embedded fingerprint decides). */
  function unsealDek(material: Uint8Array, backupId: string, sealed: Uint8Array, nonce: Uint8Array, what: string): OpenedDek<B> {
    const at = RECIPIENT.magic.length;
    const embedded = sealed.subarray(at, at + RECIPIENT.fingerprintBytes);
    const ciphertext = sealed.subarray(at + RECIPIENT.fingerprintBytes, SEALED_DEK_BYTES - WRAPPED_DEK_BYTES);
    const keys = masterKeys(material);
    let current = '';
    for (const [keyIndex, key] of keys.entries()) {
      const seed = recipientSeed(key);
      try {
        const own = fingerprintBytes(xwing.getPublicKey(seed));
        current ||= fingerprintText(own);
        if (!own.every((byte, i) => embedded[i] === byte)) continue;
        let sharedSecret: Uint8Array;
        try {
          sharedSecret = xwing.decapsulate(ciphertext, seed);
        } catch {
          throw new IntegrityError(what);
        }
        try {
          const box = sealed.subarray(SEALED_DEK_BYTES - WRAPPED_DEK_BYTES);
          return { dek: open(sharedSecret, box, nonce, AD.sealedDek(backupId, fingerprintText(own)), what, true), keyIndex, form: 'sealed' };
        } finally {
          p.wipe(sharedSecret);
        }
      } finally {
        p.wipe(seed);
      }
    }
    const older = keys.length > 1 ? ` nor any of its ${keys.length - 1} older keys` : '';
    throw new IntegrityError(`the backup data key is sealed to another recipient ${fingerprintText(embedded)}, not this vault's ${current}${older}`);
  }

  /**
   * The backup's DEK, in a secure buffer, with the index in the ring (0 = current) of the key that opened it, from
   * either form of wrappedDek: exactly 48 bytes is wrapped with a master key (each key of the ring is tried in order,
   * the AEAD tag decides), exactly 1180 bytes starting "cxw1" is sealed to the recipient of the key whose
   * fingerprint it embeds; anything else is an IntegrityError.
   */
  function openDek(
    masterKey: Uint8Array,
    backupId: string,
    fields: { wrappedDek: string | null; wrappedDekNonce: string | null },
  ): OpenedDek<B> {
    const what = 'the backup data key does not belong to this backup or vault (wrappedDek altered or swapped)';
    const wrapped = fromBase64(fields.wrappedDek, 'wrappedDek');
    const nonce = fromBase64(fields.wrappedDekNonce, 'wrappedDekNonce');
    if (wrapped.length === WRAPPED_DEK_BYTES) {
      for (const [keyIndex, key] of masterKeys(masterKey).entries()) {
        try {
          return { dek: open(key, wrapped, nonce, AD.dek(backupId), what, true), keyIndex, form: 'master' };
        } catch (error) {
          if (!(error instanceof IntegrityError)) throw error;
        }
      }
      throw new IntegrityError(what);
    }
    if (isSealedDek(wrapped)) return unsealDek(masterKey, backupId, wrapped, nonce, what);
    // Unauthenticated here (the server hands it over), so the message names both readings.
    const magic = magicOf(wrapped);
    if (magic !== null && magic !== RECIPIENT.magic) {
      throw new NewerFormatError(
        `the backup's data key is in a form this coffer does not read (${JSON.stringify(magic)}, ${wrapped.length} bytes): it was ` +
          'made by a newer coffer (upgrade coffer to restore it), or the server altered it',
      );
    }
    throw new IntegrityError(what);
  }

  /** The backup's DEK (openDek without the key index). */
  function unwrapDek(
    masterKey: Uint8Array,
    backupId: string,
    fields: { wrappedDek: string | null; wrappedDekNonce: string | null },
  ): B {
    return openDek(masterKey, backupId, fields).dek;
  }

  /** The recipient fingerprint of every key of the ring, current first (what `coffer recipient` printed for each). */
  function keyFingerprints(material: Uint8Array): string[] {
    return masterKeys(material).map((key) => {
      const seed = recipientSeed(key);
      try {
        return fingerprintText(fingerprintBytes(xwing.getPublicKey(seed)));
      } finally {
        p.wipe(seed);
      }
    });
  }

  /** Seals metadata given as its exact JSON text (the test vectors fix the bytes). */
  function sealMetadataJson(dek: Uint8Array, backupId: string, json: string, nonce?: Uint8Array): SealedMetadata {
    const box = seal(dek, utf8.encode(json), AD.metadata(backupId), nonce);
    return { encryptedMetadata: p.toBase64(box.ciphertext), encryptedMetadataNonce: p.toBase64(box.nonce) };
  }

  const sealMetadata = (dek: Uint8Array, backupId: string, metadata: BackupMetadata, nonce?: Uint8Array): SealedMetadata =>
    sealMetadataJson(dek, backupId, JSON.stringify(metadata), nonce);

  function openMetadata(
    dek: Uint8Array,
    backupId: string,
    fields: { encryptedMetadata: string | null; encryptedMetadataNonce: string | null },
  ): BackupMetadata {
    const sealed = fromBase64(fields.encryptedMetadata, 'encryptedMetadata');
    const nonce = fromBase64(fields.encryptedMetadataNonce, 'encryptedMetadataNonce');
    return parseMetadata(open(dek, sealed, nonce, AD.metadata(backupId), 'the backup metadata was altered'));
  }

  return {
    randomBytes,
    newKey,
    wipe,
    fromBase64,
    newKdfParams,
    deriveKek,
    wrapMasterKey,
    unwrapMasterKey,
    addMasterKey,
    keyMaterialOf,
    masterKeys,
    wrapDek,
    unwrapDek,
    openDek,
    keyFingerprints,
    deriveRecipient,
    parseRecipient,
    sealDek,
    sealMetadata,
    sealMetadataJson,
    openMetadata,
  };
}

/** Receives each piece of output as soon as it is complete (a Node stream's push, a TransformStream's enqueue). */
export type Emit<B> = (bytes: B) => void;

/**
 * Encrypts a byte stream fed in pieces of any size: the header first, then one sealed chunk per 64 KiB, the last one
 * TAG_FINAL. Ciphertext is emitted chunk by chunk.
 */
export class SecretStreamWriter<B extends Uint8Array> {
  private state: StreamState | undefined;
  private readonly pending = new Uint8Array(CHUNK_BYTES);
  private filled = 0;

  constructor(
    private readonly p: Primitives<B>,
    private readonly key: Uint8Array,
  ) {}

  private start(emit: Emit<B>): void {
    if (this.state !== undefined) return;
    const header = this.p.alloc(STREAM_HEADER_BYTES);
    this.state = this.p.streamInitPush(header, this.key);
    emit(header);
  }

  private seal(length: number, tag: number, emit: Emit<B>): void {
    const sealed = this.p.alloc(length + STREAM_ABYTES);
    this.p.streamPush(this.state, sealed, this.pending.subarray(0, length), tag);
    this.filled = 0;
    emit(sealed);
  }

  push(chunk: Uint8Array, emit: Emit<B>): void {
    this.start(emit);
    let offset = 0;
    while (offset < chunk.length) {
      // A full pending chunk is only sealed once more data shows it is not the last one.
      if (this.filled === CHUNK_BYTES) this.seal(CHUNK_BYTES, TAG_MESSAGE, emit);
      const take = Math.min(CHUNK_BYTES - this.filled, chunk.length - offset);
      this.pending.set(chunk.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
    }
  }

  /** The last chunk (TAG_FINAL), also for an empty stream. */
  finish(emit: Emit<B>): void {
    this.start(emit);
    this.seal(this.filled, TAG_FINAL, emit);
    this.dispose();
  }

  /** Zeroes the state and the pending plaintext. */
  dispose(): void {
    if (this.state !== undefined) this.p.streamWipe(this.state);
    this.p.wipe(this.pending);
  }
}

/**
 * Decrypts and authenticates a secretstream fed in pieces of any size: every frame must verify, the last one must
 * carry TAG_FINAL and nothing may follow it. Plaintext comes out frame by frame (bounded memory) and is
 * unconfirmed until finish() returned without throwing.
 */
export class SecretStreamReader<B extends Uint8Array> {
  private state: StreamState | undefined;
  private readonly header = new Uint8Array(STREAM_HEADER_BYTES);
  private headerFilled = 0;
  private readonly frame = new Uint8Array(FRAME_BYTES);
  private filled = 0;
  private frames = 0;
  private finished = false;
  /** Ciphertext bytes seen so far. */
  bytesIn = 0;

  constructor(
    private readonly p: Primitives<B>,
    private readonly key: Uint8Array,
  ) {}

  private pull(length: number, emit: Emit<B>): void {
    if (length < STREAM_ABYTES) throw new IntegrityError('the archive is truncated (partial chunk)');
    const plain = this.p.alloc(length - STREAM_ABYTES);
    const tag = this.p.streamPull(this.state, plain, this.frame.subarray(0, length));
    if (tag === undefined) {
      throw new IntegrityError(`archive chunk ${this.frames} failed authentication (tampered, truncated or wrong key)`);
    }
    this.frames += 1;
    if (tag === TAG_FINAL) this.finished = true;
    else if (tag !== TAG_MESSAGE) throw new IntegrityError(`archive chunk ${this.frames - 1} has an unexpected tag`);
    this.filled = 0;
    if (plain.length > 0) emit(plain);
  }

  /** Feeds ciphertext; emits the plaintext of every frame it completes. */
  push(chunk: Uint8Array, emit: Emit<B>): void {
    this.bytesIn += chunk.length;
    let offset = 0;
    if (this.headerFilled < STREAM_HEADER_BYTES) {
      const take = Math.min(STREAM_HEADER_BYTES - this.headerFilled, chunk.length);
      this.header.set(chunk.subarray(0, take), this.headerFilled);
      this.headerFilled += take;
      offset = take;
      if (this.headerFilled === STREAM_HEADER_BYTES) this.state = this.p.streamInitPull(this.header, this.key);
    }
    while (offset < chunk.length) {
      if (this.finished) throw new IntegrityError('the archive has data after its final chunk');
      const take = Math.min(FRAME_BYTES - this.filled, chunk.length - offset);
      this.frame.set(chunk.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
      if (this.filled === FRAME_BYTES) this.pull(FRAME_BYTES, emit);
    }
  }

  /** Ends the stream: the last (short) frame, and the proof that the final tag was seen. */
  finish(emit: Emit<B>): void {
    if (this.headerFilled < STREAM_HEADER_BYTES) throw new IntegrityError('the archive is truncated (no header)');
    if (!this.finished && this.filled > 0) this.pull(this.filled, emit);
    if (!this.finished) throw new IntegrityError('the archive is truncated (final chunk missing)');
    this.dispose();
  }

  /** Zeroes the state and the buffered ciphertext. */
  dispose(): void {
    if (this.state !== undefined) this.p.streamWipe(this.state);
    this.p.wipe(this.frame);
  }
}
