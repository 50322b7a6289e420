/**
 * The recipient reader on its own (parseRecipient, src/client/envelope-recipient.ts; docs/crypto.md §2b): the one
 * reader of every place a recipient string is given. Each fault has its own reason, in a fixed order; what it
 * accepts is exactly the key `coffer recipient` prints. Through the CLI: test/client/recipient.test.ts.
 */
import { bech32m } from '@scure/base';
import { describe, expect, it } from 'vitest';
import { deriveRecipient, newKey, parseRecipient, RECIPIENT, RecipientFormatError } from '../../src/client/envelope.js';

const masterKey = newKey();
const recipient = deriveRecipient(masterKey);
const { text } = recipient;
const words = () => [...bech32m.decode(text as `${string}1${string}`, false).words];

/** The message of the refusal (always a RecipientFormatError). */
function refusal(input: string): string {
  try {
    parseRecipient(input);
  } catch (error) {
    expect(error).toBeInstanceOf(RecipientFormatError);
    return (error as Error).message;
  }
  throw new Error('accepted');
}

const NOT_COFFER = 'not a Coffer recipient: it must start with "coffer1" (`coffer recipient` prints it)';
const MIXED = 'the recipient string mixes upper and lower case: write it all in one case, as `coffer recipient` prints it';
const DAMAGED =
  'the recipient string is damaged: its Bech32m checksum does not match (a character mistyped, missing or added); copy it again from `coffer recipient`';
const PADDING =
  "the recipient string's last character has non-zero padding bits: its checksum matches, but coffer never writes it so " +
  '(made by hand or by another tool); copy it again from `coffer recipient`';
const NOT_A_KEY = 'the recipient is not a valid X-Wing public key (its ML-KEM part fails the modulus check)';

describe('parseRecipient', () => {
  it('accepts the printed string, in either case, around white space, and gives back the same recipient', () => {
    expect(text.startsWith('coffer1')).toBe(true);
    for (const given of [text, text.toUpperCase(), `\t ${text}\r\n`, ` ${text.toUpperCase()} `]) {
      const parsed = parseRecipient(given);
      expect(parsed.text).toBe(text);
      expect(parsed.fingerprint).toBe(recipient.fingerprint);
      expect(Buffer.from(parsed.publicKey).equals(Buffer.from(recipient.publicKey))).toBe(true);
      expect(parsed.publicKey.length).toBe(RECIPIENT.publicKeyBytes);
    }
  });

  it('refuses what is not "coffer1…", first of all', () => {
    expect(refusal('')).toBe(NOT_COFFER);
    expect(refusal('age1pq1xyz')).toBe(NOT_COFFER);
    expect(refusal('coffer')).toBe(NOT_COFFER);
    expect(refusal(`x${text}`)).toBe(NOT_COFFER);
    expect(refusal(text.slice(1))).toBe(NOT_COFFER);
    // Before the case check: a mixed-case string of another kind is named as not a recipient.
    expect(refusal('Age1xyz')).toBe(NOT_COFFER);
  });

  it('refuses mixed case, before the checksum', () => {
    expect(refusal(`${text.slice(0, 9)}${text.slice(9).toUpperCase()}`)).toBe(MIXED);
    expect(refusal(`Coffer1${text.slice(7)}`)).toBe(MIXED);
  });

  it('refuses a checksum that does not match: a character changed, missing or added', () => {
    const swap = (at: number) => text.slice(0, at) + (text[at] === 'q' ? 'p' : 'q') + text.slice(at + 1);
    expect(refusal(swap(100))).toBe(DAMAGED);
    expect(refusal(swap(text.length - 1))).toBe(DAMAGED);
    expect(refusal(text.slice(0, -1))).toBe(DAMAGED);
    expect(refusal(`${text}q`)).toBe(DAMAGED);
    expect(refusal(`${text.slice(0, 50)}b${text.slice(51)}`)).toBe(DAMAGED); // 'b' is not a Bech32 character
    expect(refusal('coffer1')).toBe(DAMAGED);
  });

  it('refuses a valid Bech32m string whose prefix only begins with "coffer1"', () => {
    const other = bech32m.encode('coffer1x', words(), false);
    expect(other.startsWith('coffer1x1')).toBe(true);
    expect(refusal(other)).toBe(DAMAGED);
  });

  it('refuses a payload that is not 1,946 characters, saying how long it is', () => {
    expect(refusal(bech32m.encode('coffer', [...words(), 0], false))).toBe(
      'the recipient holds 1947 data characters (1216 bytes), not an X-Wing public key (1946 characters, 1216 bytes)',
    );
    expect(refusal(bech32m.encode('coffer', words().slice(0, 100), false))).toBe(
      'the recipient holds 100 data characters (62 bytes), not an X-Wing public key (1946 characters, 1216 bytes)',
    );
    expect(refusal(bech32m.encode('coffer', words().slice(0, -1), false))).toMatch(
      /^the recipient holds 1945 data characters \(1215 bytes\)/,
    );
    expect(refusal(bech32m.encode('coffer', [], false))).toMatch(/^the recipient holds 0 data characters \(0 bytes\)/);
  });

  it("refuses non-zero padding bits (either of the last character's two low bits), not as damage", () => {
    for (const bit of [1, 2, 3]) {
      const padded = words();
      padded[padded.length - 1]! |= bit;
      if (padded[padded.length - 1] === words().at(-1)) continue;
      expect(refusal(bech32m.encode('coffer', padded, false))).toBe(PADDING);
    }
    // The bits above the padding are the key's: changing them is another key, never refused for padding.
    const changed = words();
    changed[changed.length - 1] = (changed.at(-1)! & 3) | (~changed.at(-1)! & 0b11100);
    expect(() => parseRecipient(bech32m.encode('coffer', changed, false))).not.toThrow(/padding/);
  });

  it('refuses a well-formed string that is no ML-KEM key (coefficients ≥ q), before any upload', () => {
    const notAKey = bech32m.encode('coffer', bech32m.toWords(new Uint8Array(RECIPIENT.publicKeyBytes).fill(0xff)), false);
    expect(refusal(notAKey)).toBe(NOT_A_KEY);
    expect(refusal(notAKey.toUpperCase())).toBe(NOT_A_KEY);
  });
});
