/**
 * The vault's key material (docs/crypto.md §1): a KEK from the passphrase (Argon2id), and under it a legacy 32-byte
 * master key or a keyring "ckr1" ‖ n ‖ n × 32 B keys, current first.
 */
import type { BackupAccountBody, BackupAccountEnvelopeBody } from '../contract/schemas.js';
import {
  AD,
  CRYPTO_VERSION,
  DEFAULT_KDF_PROFILE,
  IntegrityError,
  KDF_ACCEPTED_MAX,
  KDF_ACCEPTED_MIN,
  KEYRING,
  type KdfProfile,
  NewerFormatError,
  WrongPassphraseError,
} from './envelope-format.js';
import {
  AEAD_ABYTES,
  decodeBase64,
  KEY_BYTES,
  magicOf,
  open,
  type Primitives,
  randomBytes,
  SALT_BYTES,
  seal,
  utf8,
} from './envelope-primitives.js';

const MALFORMED_KEYRING = 'the vault key material is neither a 32-byte master key nor a keyring';

/** The length of the plaintext under the KEK: a legacy master key (n = 0) or a keyring of n keys. */
const keyringBytes = (n: number) => KEYRING.headerBytes + n * KEY_BYTES;
/** The largest wrapped material a client unwraps (the server's cap on decoded binary fields). */
const MAX_WRAPPED_MATERIAL_BYTES = 4096;

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
export type VaultFields = Pick<BackupAccountBody, 'cryptoVersion' | 'kdf' | 'wrappedMasterKey' | 'wrappedMasterKeyNonce'>;

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
  return new NewerFormatError(
    `${MALFORMED_KEYRING} this coffer knows (${material.length} bytes): it was made by a newer coffer, or a faulty one; upgrade coffer`,
  );
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

function checkKdf({ salt, opslimit, memlimit }: KdfParams): void {
  if (salt.length !== SALT_BYTES) throw new IntegrityError(`the vault salt must be ${SALT_BYTES} bytes`);
  if (!Number.isInteger(opslimit) || opslimit < KDF_ACCEPTED_MIN.opslimit || opslimit > KDF_ACCEPTED_MAX.opslimit) {
    throw new IntegrityError(`the vault's Argon2id opslimit (${opslimit}) is outside the accepted range`);
  }
  if (!Number.isInteger(memlimit) || memlimit < KDF_ACCEPTED_MIN.memlimit || memlimit > KDF_ACCEPTED_MAX.memlimit) {
    throw new IntegrityError(`the vault's Argon2id memlimit (${memlimit}) is outside the accepted range`);
  }
}

/** The vault's operations: the KEK, wrapping and unwrapping the key material, building a keyring. */
export function vaultOperations<B extends Uint8Array>(p: Primitives<B>) {
  function newKdfParams(profile: KdfProfile = DEFAULT_KDF_PROFILE): KdfParams {
    return { salt: randomBytes(p, SALT_BYTES), ...KDF_PROFILES[profile] };
  }

  /** KEK = Argon2id13(NFC UTF-8 passphrase, salt, opslimit, memlimit), 32 bytes in a secure buffer. */
  const deriveKek = (passphrase: string, kdf: KdfParams): Promise<B> => deriveKekWith(p, passphrase, kdf);

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
      const box = seal(p, kek, masterKey, AD.master, nonce);
      return {
        cryptoVersion: CRYPTO_VERSION,
        kdf: { salt: p.toBase64(kdf.salt), opslimit: kdf.opslimit, memlimit: kdf.memlimit },
        wrappedMasterKey: p.toBase64(box.ciphertext),
        wrappedMasterKeyNonce: p.toBase64(box.nonce),
      };
    } finally {
      p.wipe(kek);
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
    const kdf = { salt: decodeBase64(p, vault.kdf.salt, 'kdf.salt'), opslimit: vault.kdf.opslimit, memlimit: vault.kdf.memlimit };
    const wrapped = decodeBase64(p, vault.wrappedMasterKey, 'wrappedMasterKey');
    const nonce = decodeBase64(p, vault.wrappedMasterKeyNonce, 'wrappedMasterKeyNonce');
    // Any length the server accepts is opened: the AEAD tag tells a wrong passphrase from a form only a newer coffer reads.
    if (wrapped.length <= AEAD_ABYTES || wrapped.length > MAX_WRAPPED_MATERIAL_BYTES) throw new WrongPassphraseError();
    const kek = await deriveKek(passphrase, kdf);
    let material: B;
    try {
      material = open(p, kek, wrapped, nonce, AD.master, 'the vault key material', true);
    } catch {
      throw new WrongPassphraseError();
    } finally {
      p.wipe(kek);
    }
    try {
      masterKeys(material);
    } catch {
      const error = unreadableMaterial(material);
      p.wipe(material);
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

  return { newKdfParams, deriveKek, wrapMasterKey, unwrapMasterKey, addMasterKey, keyMaterialOf, masterKeys };
}

/** KEK = Argon2id13(NFC UTF-8 passphrase, salt, opslimit, memlimit), 32 bytes in a secure buffer. */
async function deriveKekWith<B extends Uint8Array>(p: Primitives<B>, passphrase: string, kdf: KdfParams): Promise<B> {
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
