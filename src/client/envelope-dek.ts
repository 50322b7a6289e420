/**
 * A backup's data key (docs/crypto.md §2, §2b): 32 random bytes, wrapped with the vault's current master key, or
 * sealed to a recipient by a host that holds no master key; opened by whichever key of the ring it names.
 */
import { ml_kem768_x25519 as xwing } from '@noble/post-quantum/hybrid.js';
import { AD, IntegrityError, NewerFormatError, RECIPIENT } from './envelope-format.js';
import { decodeBase64, magicOf, open, type Primitives, randomBytes, seal, utf8 } from './envelope-primitives.js';
import {
  fingerprintBytes,
  type Recipient,
  RecipientFormatError,
  recipientSeed,
  takeCheckedEncapsulation,
  XWING_ESEED_BYTES,
} from './envelope-recipient.js';
import { masterKeys } from './envelope-vault.js';
import { fingerprintText, isSealedDek, SEALED_DEK_BYTES, WRAPPED_DEK_BYTES } from './key-usage.js';

export interface WrappedDek {
  wrappedDek: string;
  wrappedDekNonce: string;
}

/** A backup's DEK and which key of the vault's ring opened it (0 = the current key), in which form it was stored. */
export interface OpenedDek<B extends Uint8Array = Uint8Array> {
  dek: B;
  keyIndex: number;
  form: 'master' | 'sealed';
}

/** The data key's operations: wrapping it, sealing it to a recipient, opening either form. */
export function dekOperations<B extends Uint8Array>(p: Primitives<B>) {
  /** Wraps a new backup's DEK with the current master key (the first of a keyring). */
  function wrapDek(masterKey: Uint8Array, backupId: string, dek: Uint8Array, nonce?: Uint8Array): WrappedDek {
    const box = seal(p, masterKeys(masterKey)[0]!, dek, AD.dek(backupId), nonce);
    return { wrappedDek: p.toBase64(box.ciphertext), wrappedDekNonce: p.toBase64(box.nonce) };
  }

  /**
   * Seals a backup's DEK to a recipient (no master key needed): wrappedDek = "cxw1" ‖ fingerprint ‖ X-Wing ct ‖
   * XChaCha20-Poly1305(ss, nonce, AD "coffer/v1/sealed-dek/<id>/<fingerprint>", DEK). `eseed` fixes the
   * encapsulation (test vectors only).
   */
  function sealDek(recipient: Recipient, backupId: string, dek: Uint8Array, nonce?: Uint8Array, eseed?: Uint8Array): WrappedDek {
    if (recipient.publicKey.length !== RECIPIENT.publicKeyBytes) throw new RecipientFormatError('not an X-Wing public key');
    const fingerprint = fingerprintBytes(p, recipient.publicKey);
    if (eseed && eseed.length !== XWING_ESEED_BYTES) throw new Error(`eseed must be ${XWING_ESEED_BYTES} bytes`);
    // The encapsulation parseRecipient made when it checked this recipient, if not used yet; else a new one.
    let encapsulated = eseed ? undefined : takeCheckedEncapsulation(recipient);
    if (!encapsulated) {
      const coins = eseed ?? randomBytes(p, XWING_ESEED_BYTES);
      try {
        encapsulated = xwing.encapsulate(recipient.publicKey, coins);
      } catch {
        throw new RecipientFormatError('the recipient is not a valid X-Wing public key');
      } finally {
        if (!eseed) p.wipe(coins);
      }
    }
    const { cipherText, sharedSecret } = encapsulated;
    try {
      const box = seal(p, sharedSecret, dek, AD.sealedDek(backupId, fingerprintText(fingerprint)), nonce);
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
    const wrapped = decodeBase64(p, fields.wrappedDek, 'wrappedDek');
    const nonce = decodeBase64(p, fields.wrappedDekNonce, 'wrappedDekNonce');
    if (wrapped.length === WRAPPED_DEK_BYTES) {
      for (const [keyIndex, key] of masterKeys(masterKey).entries()) {
        try {
          return { dek: open(p, key, wrapped, nonce, AD.dek(backupId), what, true), keyIndex, form: 'master' };
        } catch (error) {
          if (!(error instanceof IntegrityError)) throw error;
        }
      }
      throw new IntegrityError(what);
    }
    if (isSealedDek(wrapped)) return unsealDek(p, masterKey, backupId, wrapped, nonce, what);
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
  function unwrapDek(masterKey: Uint8Array, backupId: string, fields: { wrappedDek: string | null; wrappedDekNonce: string | null }): B {
    return openDek(masterKey, backupId, fields).dek;
  }

  return { wrapDek, sealDek, openDek, unwrapDek };
}

/** The key of the ring whose recipient the DEK was sealed to (the embedded fingerprint decides). */
function unsealDek<B extends Uint8Array>(
  p: Primitives<B>,
  material: Uint8Array,
  backupId: string,
  sealed: Uint8Array,
  nonce: Uint8Array,
  what: string,
): OpenedDek<B> {
  const at = RECIPIENT.magic.length;
  const embedded = sealed.subarray(at, at + RECIPIENT.fingerprintBytes);
  const ciphertext = sealed.subarray(at + RECIPIENT.fingerprintBytes, SEALED_DEK_BYTES - WRAPPED_DEK_BYTES);
  const keys = masterKeys(material);
  let current = '';
  for (const [keyIndex, key] of keys.entries()) {
    const seed = recipientSeed(p, key);
    try {
      const own = fingerprintBytes(p, xwing.getPublicKey(seed));
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
        return {
          dek: open(p, sharedSecret, box, nonce, AD.sealedDek(backupId, fingerprintText(own)), what, true),
          keyIndex,
          form: 'sealed',
        };
      } finally {
        p.wipe(sharedSecret);
      }
    } finally {
      p.wipe(seed);
    }
  }
  const older = keys.length > 1 ? ` nor any of its ${keys.length - 1} older keys` : '';
  throw new IntegrityError(
    `the backup data key is sealed to another recipient ${fingerprintText(embedded)}, not this vault's ${current}${older}`,
  );
}
