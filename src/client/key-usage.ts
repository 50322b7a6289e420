/**
 * Which key a backup uses, as far as can be told without a secret (docs/crypto.md §2, §2b). Pure (no libsodium, no
 * Node or DOM API), so the console page reads it before any crypto is loaded, and the CLI could print the same.
 */
import { base64 } from '@scure/base';
import { RECIPIENT } from './envelope-format.js';

/** wrappedDek sizes: the master-key-wrapped form, and the form sealed to a recipient (docs/crypto.md §2, §2b). */
export const WRAPPED_DEK_BYTES = 32 + 16; // DEK + Poly1305 tag
export const SEALED_DEK_BYTES = RECIPIENT.magic.length + RECIPIENT.fingerprintBytes + RECIPIENT.ciphertextBytes + WRAPPED_DEK_BYTES; // 1180

/** The form of a wrappedDek as read without a key: wrapped with a master key, or sealed to a recipient fingerprint. */
export type DekForm = { form: 'master' } | { form: 'sealed'; fingerprint: string };

/** "xxxx-xxxx-xxxx-xxxx": 8 fingerprint bytes as lowercase hex in groups of four. */
export function fingerprintText(raw: Uint8Array): string {
  const hex = Array.from(raw, (byte) => byte.toString(16).padStart(2, '0')).join('');
  return hex.match(/.{4}/g)!.join('-');
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Whether wrappedDek bytes are the sealed form: exactly 1180 bytes starting "cxw1". */
export const isSealedDek = (wrapped: Uint8Array): boolean =>
  wrapped.length === SEALED_DEK_BYTES && RECIPIENT.magic.split('').every((c, i) => wrapped[i] === c.charCodeAt(0));

/**
 * What a wrappedDek (base64) says about its key: 48 bytes is wrapped with a master key (which one, only the keys can
 * tell), 1180 bytes starting "cxw1" is sealed to the recipient whose fingerprint it embeds. Null for a missing or
 * malformed field. The embedded fingerprint is the writer's claim: only opening the DEK (openDek) confirms it.
 */
export function dekForm(wrappedDek: string | null | undefined): DekForm | null {
  if (typeof wrappedDek !== 'string' || !BASE64.test(wrappedDek)) return null;
  let wrapped: Uint8Array;
  try {
    wrapped = base64.decode(wrappedDek);
  } catch {
    return null;
  }
  if (wrapped.length === WRAPPED_DEK_BYTES) return { form: 'master' };
  if (!isSealedDek(wrapped)) return null;
  const at = RECIPIENT.magic.length;
  return { form: 'sealed', fingerprint: fingerprintText(wrapped.subarray(at, at + RECIPIENT.fingerprintBytes)) };
}

/** The key of the ring a backup uses: the current one (index 0) or a retired one (an older key, kept to read). */
export interface KeyUse {
  form: DekForm['form'];
  /** 0 = the current key; n = the n-th older key. */
  keyIndex: number;
  /** Recipient fingerprint of that key (what `coffer recipient` printed while it was current). */
  fingerprint: string;
  current: boolean;
}

/** A backup's key use from the key index that opened its DEK and the ring's fingerprints (current first). */
export function keyUse(form: DekForm['form'], keyIndex: number, fingerprints: readonly string[]): KeyUse {
  const fingerprint = fingerprints[keyIndex];
  if (fingerprint === undefined) throw new RangeError(`no key ${keyIndex} in a ring of ${fingerprints.length}`);
  return { form, keyIndex, fingerprint, current: keyIndex === 0 };
}
