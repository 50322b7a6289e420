/** Comparing secrets (tokens, signatures, CSRF tokens) without leaking through timing. */
import { createHash, timingSafeEqual } from 'node:crypto';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Whether `given` equals `expected`, in constant time: both sides are hashed to one length first, so neither
 * the position of the first difference nor a difference in length shows in the time taken.
 */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(sha256(given), sha256(expected));
}
