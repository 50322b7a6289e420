/**
 * The vault's recipient (docs/crypto.md §2b): an X-Wing key pair derived from each master key, its public key as a
 * Bech32m string "coffer1…" and an 8-byte fingerprint. A backup host seals DEKs to it (./envelope-dek.ts).
 */
import { ml_kem768_x25519 as xwing } from '@noble/post-quantum/hybrid.js';
import { bech32m } from '@scure/base';
import { RECIPIENT } from './envelope-format.js';
import { KEY_BYTES, type Primitives, randomBytes } from './envelope-primitives.js';
import { masterKeys } from './envelope-vault.js';
import { fingerprintText } from './key-usage.js';

/** The X-Wing encapsulation randomness (ML-KEM coins ‖ X25519 ephemeral secret). */
export const XWING_ESEED_BYTES = 64;

/** A recipient string that is not one (typo, truncation, another format): the user's input, not the server's. */
export class RecipientFormatError extends Error {
  override readonly name = 'RecipientFormatError';
}

/** A public recipient: what a backup host needs to seal a backup's DEK. */
export interface Recipient {
  publicKey: Uint8Array;
  /** "xxxx-xxxx-xxxx-xxxx": the first 8 bytes of SHA-256(publicKey), lowercase hex. */
  fingerprint: string;
  /** Bech32m, HRP "coffer". */
  text: string;
}

/** An X-Wing encapsulation to a recipient: the ciphertext and the shared secret it carries. */
export interface Encapsulation {
  cipherText: Uint8Array;
  sharedSecret: Uint8Array;
}

/**
 * The encapsulation parseRecipient made to check a recipient (with fresh random coins, like any other), kept for the
 * first DEK sealed to it: a backup host then runs X-Wing once per backup, not twice (the pure-JavaScript ML-KEM part
 * is the costliest code a backup host runs cold). Taken once, at most.
 */
const checkedEncapsulations = new WeakMap<Recipient, { publicKey: Uint8Array; encapsulation: Encapsulation }>();
/**
 * How long a kept encapsulation waits for its DEK (one backup's scan and upload) before it is wiped: a long-running
 * process (the agent) does not hold a secret for a backup it may run hours later.
 */
const KEEP_ENCAPSULATION_MS = 60 * 60 * 1000;

/** The encapsulation kept for `recipient` when its public key is still the one checked, forgotten once taken. */
export function takeCheckedEncapsulation(recipient: Recipient): Encapsulation | undefined {
  const kept = checkedEncapsulations.get(recipient);
  if (!kept) return undefined;
  checkedEncapsulations.delete(recipient);
  const { publicKey } = recipient;
  const same = publicKey.length === kept.publicKey.length && publicKey.every((byte, i) => byte === kept.publicKey[i]);
  return same ? kept.encapsulation : undefined;
}

/** The first 8 bytes of SHA-256(public key). */
export function fingerprintBytes(p: Primitives, publicKey: Uint8Array): Uint8Array {
  const digest = p.alloc(32);
  p.sha256(digest, publicKey);
  return digest.slice(0, RECIPIENT.fingerprintBytes);
}

/** The X-Wing seed of the vault's recipient, in a secure buffer: crypto_kdf_derive_from_key(32, 1, "cofferxw", master key). */
export function recipientSeed<B extends Uint8Array>(p: Primitives<B>, masterKey: Uint8Array): B {
  if (masterKey.length !== KEY_BYTES) throw new Error(`the master key must be ${KEY_BYTES} bytes`);
  const seed = p.secureAlloc(KEY_BYTES);
  p.kdfDerive(seed, RECIPIENT.kdfSubkeyId, RECIPIENT.kdfContext, masterKey);
  return seed;
}

/** The recipient's operations: deriving it from the key material, reading it as the user gave it. */
export function recipientOperations<B extends Uint8Array>(p: Primitives<B>) {
  function recipientOf(publicKey: Uint8Array): Recipient {
    return {
      publicKey,
      fingerprint: fingerprintText(fingerprintBytes(p, publicKey)),
      text: bech32m.encode(RECIPIENT.hrp, bech32m.toWords(publicKey), false),
    };
  }

  /** The vault's recipient (public): X-Wing KeyGen from the seed derived from the current master key. */
  function deriveRecipient(masterKey: Uint8Array): Recipient {
    const seed = recipientSeed(p, masterKeys(masterKey)[0]!);
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
      throw new RecipientFormatError(
        'the recipient string mixes upper and lower case: write it all in one case, as `coffer recipient` prints it',
      );
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
    // ML-KEM's encapsulation-key check (FIPS 203 §7.2) now, not after the upload when the DEK is sealed: an
    // encapsulation, with fresh coins, which the first sealDek to this recipient then uses.
    const coins = randomBytes(p, XWING_ESEED_BYTES);
    let encapsulation: Encapsulation;
    try {
      encapsulation = xwing.encapsulate(publicKey, coins);
    } catch {
      throw new RecipientFormatError('the recipient is not a valid X-Wing public key (its ML-KEM part fails the modulus check)');
    } finally {
      p.wipe(coins);
    }
    const recipient = recipientOf(publicKey);
    checkedEncapsulations.set(recipient, { publicKey: Uint8Array.from(publicKey), encapsulation });
    const expiry = setTimeout(() => {
      if (checkedEncapsulations.get(recipient)?.encapsulation !== encapsulation) return;
      checkedEncapsulations.delete(recipient);
      p.wipe(encapsulation.sharedSecret);
    }, KEEP_ENCAPSULATION_MS);
    (expiry as { unref?: () => void }).unref?.(); // never keeps a process alive
    return recipient;
  }

  /** The recipient fingerprint of every key of the ring, current first (what `coffer recipient` printed for each). */
  function keyFingerprints(material: Uint8Array): string[] {
    return masterKeys(material).map((key) => {
      const seed = recipientSeed(p, key);
      try {
        return fingerprintText(fingerprintBytes(p, xwing.getPublicKey(seed)));
      } finally {
        p.wipe(seed);
      }
    });
  }

  return { deriveRecipient, parseRecipient, keyFingerprints };
}
