/**
 * The recovery kit (docs/crypto.md §1c), written once for the CLI and the console page: the vault's master keys as
 * BIP-39 English words, 24 per 32-byte key, current first. It imports no Node or DOM API; each side binds it to its
 * envelope (src/client/kit.ts to sodium-native, console/src/crypto/kit.ts to libsodium in WebAssembly). Whoever holds
 * a kit reads every backup, exactly like whoever holds the passphrase.
 */
import { entropyToMnemonic, mnemonicToEntropy } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english.js';
import { KEY_BYTES } from './envelope-primitives.js';
import { KEYRING } from './envelope-format.js';

export const KIT_HEADER = 'coffer recovery kit v1';
export const WORDS_PER_KEY = 24;
const english = new Set(wordlist);

/** A kit that cannot be read (a mistyped word, a missing line): the user's input, not the server's. */
export class KitFormatError extends Error {
  override readonly name = 'KitFormatError';
}

/** What the kit needs of an envelope (createEnvelope's operations on one provider). */
export interface KitEnvelope<B extends Uint8Array> {
  deriveRecipient(material: Uint8Array): { fingerprint: string };
  keyMaterialOf(keys: readonly Uint8Array[]): B;
  masterKeys(material: Uint8Array): Uint8Array[];
  wipe(...buffers: (Uint8Array | undefined)[]): void;
}

export interface Kit<B extends Uint8Array = Uint8Array> {
  server: string | null;
  /** The key material rebuilt from the words (secure buffer: wipe it when done). */
  material: B;
  keys: number;
}

function keyFromWords(value: string, label: string, at: string): Uint8Array {
  const words = value.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length !== WORDS_PER_KEY) throw new KitFormatError(`${at} (${label}) has ${words.length} words, not ${WORDS_PER_KEY}`);
  const unknown = words.findIndex((word) => !english.has(word));
  if (unknown >= 0) throw new KitFormatError(`${at} (${label}): word ${unknown + 1} "${words[unknown]}" is not a BIP-39 English word`);
  let key: Uint8Array;
  try {
    key = mnemonicToEntropy(words.join(' '), wordlist);
  } catch {
    throw new KitFormatError(`${at} (${label}): the words' checksum does not match (a word mistyped or swapped)`);
  }
  if (key.length !== KEY_BYTES) throw new KitFormatError(`${at} (${label}) is not a ${KEY_BYTES}-byte key`);
  return key;
}

/** Whether a text is a whole kit (its header line) rather than bare words. */
export const isKitText = (text: string): boolean =>
  text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .some((line) => line.toLowerCase() === KIT_HEADER);

/** The kit's operations on one envelope. */
export function createKit<B extends Uint8Array>(env: KitEnvelope<B>) {
  /** The kit text for key material (a master key or a keyring). */
  function formatKit(material: Uint8Array, server: string): string {
    const keys = env.masterKeys(material);
    return [
      '# Coffer recovery kit. Whoever holds this kit can read every backup of this vault, without the passphrase:',
      '# keep it offline and as safe as the passphrase. `coffer recover --kit-file <file>` sets a new passphrase with it.',
      KIT_HEADER,
      `server: ${server}`,
      `recipient: ${env.deriveRecipient(material).fingerprint}`,
      ...keys.map((key, i) => `key ${i + 1}: ${entropyToMnemonic(key, wordlist)}`),
      '',
    ].join('\n');
  }

  /** Key material from decoded keys, checked against the kit's recipient line when there is one; wipes `keys`. */
  function materialOf(keys: Uint8Array[], fingerprint: string | null): B {
    try {
      if (keys.length === 0) throw new KitFormatError('the kit holds no key line ("key 1: <24 words>")');
      if (keys.length > KEYRING.maxKeys)
        throw new KitFormatError(`the kit holds ${keys.length} keys; a vault holds at most ${KEYRING.maxKeys}`);
      const material = env.keyMaterialOf(keys);
      if (fingerprint !== null && env.deriveRecipient(material).fingerprint !== fingerprint) {
        env.wipe(material);
        throw new KitFormatError(`the kit's keys do not give its recipient ${fingerprint}: a key line is from another kit`);
      }
      return material;
    } finally {
      for (const key of keys) env.wipe(key);
    }
  }

  /**
   * Reads a kit (docs/crypto.md §1c, "Reading a kit"); KitFormatError with the line at fault for anything it cannot
   * use. Lines end in LF or CRLF; each is trimmed; blank lines and lines starting with "#" are skipped. The first
   * other line is the header, in any case. Then only `server:` and `recipient:` (each at most once) and
   * `key 1:` … `key n:` in order (n ≤ 64), labels in any case, "key" and its number one space apart, no space before
   * the colon; a key line holds 24 BIP-39 English words in any case, separated by any white space.
   */
  function parseKit(text: string): Kit<B> {
    const lines = text
      .split(/\r?\n/)
      .map((line, i) => ({ line: line.trim(), at: i + 1 }))
      .filter(({ line }) => line !== '' && !line.startsWith('#'));
    if (lines[0]?.line.toLowerCase() !== KIT_HEADER)
      throw new KitFormatError(`not a Coffer recovery kit: its first line must be "${KIT_HEADER}"`);
    let server: string | null = null;
    let fingerprint: string | null = null;
    const keys: Uint8Array[] = [];
    try {
      for (const { line, at } of lines.slice(1)) {
        const field = /^([a-z]+(?: \d+)?):\s*(.*)$/i.exec(line);
        if (!field) throw new KitFormatError(`line ${at} is not "server:", "recipient:" or "key <n>:"`);
        const [, name, value] = field as unknown as [string, string, string];
        const label = name.toLowerCase();
        if ((label === 'server' && server !== null) || (label === 'recipient' && fingerprint !== null)) {
          throw new KitFormatError(`line ${at}: a second "${label}:" line (a kit has one)`);
        }
        if (label === 'server') server = value;
        else if (label === 'recipient') fingerprint = value.toLowerCase();
        else if (label === `key ${keys.length + 1}`) keys.push(keyFromWords(value, label, `line ${at}`));
        else throw new KitFormatError(`line ${at}: expected "key ${keys.length + 1}:", found "${name}:"`);
      }
    } catch (error) {
      for (const key of keys) env.wipe(key);
      throw error;
    }
    return { server, material: materialOf(keys, fingerprint), keys: keys.length };
  }

  /**
   * Reads the key lines' words alone, as typed from a printed kit: 24 words per key, current key first, separated by
   * any white space (and optional "key <n>:" labels). No recipient line, so nothing checks the keys against each
   * other: the backups do (recovery refuses keys that open none of them).
   */
  function parseKitWords(text: string): Kit<B> {
    const words = text
      .replace(/\bkey\s+\d+\s*:/gi, ' ')
      .toLowerCase()
      .split(/\s+/)
      .filter(Boolean);
    if (words.length === 0) throw new KitFormatError('no words: type the 24 words of each key line of the kit');
    if (words.length % WORDS_PER_KEY !== 0) {
      throw new KitFormatError(
        `${words.length} words: a kit has ${WORDS_PER_KEY} words per key (${WORDS_PER_KEY}, ${2 * WORDS_PER_KEY}, …)`,
      );
    }
    const keys: Uint8Array[] = [];
    try {
      for (let i = 0; i < words.length; i += WORDS_PER_KEY) {
        const n = i / WORDS_PER_KEY + 1;
        keys.push(keyFromWords(words.slice(i, i + WORDS_PER_KEY).join(' '), `key ${n}`, `words ${i + 1}–${i + WORDS_PER_KEY}`));
      }
    } catch (error) {
      for (const key of keys) env.wipe(key);
      throw error;
    }
    return { server: null, material: materialOf(keys, null), keys: keys.length };
  }

  /** A whole kit (with its header line) or the bare words of its key lines. */
  const parseKitOrWords = (text: string): Kit<B> => (isKitText(text) ? parseKit(text) : parseKitWords(text));

  return { formatKit, parseKit, parseKitWords, parseKitOrWords };
}

/**
 * Whether a kit may replace the vault's wrapping, from how many READY backups' data keys its keys opened (the rule of
 * `coffer recover`, docs/crypto.md §1c): it must open at least one; it must open all of them, and a vault with no
 * backup is accepted, only when forced (a kit that lacks a newer key would lose that key for good). Null: go ahead.
 */
export function kitRefusal(opened: number, checked: number, force: boolean): 'foreign' | 'partial' | 'unchecked' | null {
  if (checked > 0 && opened === 0) return 'foreign';
  if (!force && checked === 0) return 'unchecked';
  if (!force && opened < checked) return 'partial';
  return null;
}
