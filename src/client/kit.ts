/**
 * The recovery kit (docs/crypto.md §1c): the vault's master keys as BIP-39 English words, 24 per 32-byte key, current
 * first. Whoever holds it reads every backup, exactly like whoever holds the passphrase.
 */
import { entropyToMnemonic, mnemonicToEntropy } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english.js';
import { deriveRecipient, keyMaterialOf, KEY_BYTES, masterKeys, wipe } from './envelope.js';

export const KIT_HEADER = 'coffer recovery kit v1';
const WORDS_PER_KEY = 24;
const english = new Set(wordlist);

/** A kit that cannot be read (a mistyped word, a missing line): the user's input, not the server's. */
export class KitFormatError extends Error {
  override readonly name = 'KitFormatError';
}

/** The kit text for key material (a master key or a keyring). */
export function formatKit(material: Uint8Array, server: string): string {
  const keys = masterKeys(material);
  return [
    '# Coffer recovery kit. Whoever holds this kit can read every backup of this vault, without the passphrase:',
    '# keep it offline and as safe as the passphrase. `coffer recover --kit-file <file>` sets a new passphrase with it.',
    KIT_HEADER,
    `server: ${server}`,
    `recipient: ${deriveRecipient(material).fingerprint}`,
    ...keys.map((key, i) => `key ${i + 1}: ${entropyToMnemonic(key, wordlist)}`),
    '',
  ].join('\n');
}

export interface Kit {
  server: string | null;
  /** The key material rebuilt from the words (secure buffer: wipe it when done). */
  material: Buffer;
  keys: number;
}

/** Reads a kit; KitFormatError with the line at fault for anything it cannot use. */
export function parseKit(text: string): Kit {
  const lines = text
    .split(/\r?\n/)
    .map((line, i) => ({ line: line.trim(), at: i + 1 }))
    .filter(({ line }) => line !== '' && !line.startsWith('#'));
  if (lines[0]?.line.toLowerCase() !== KIT_HEADER) throw new KitFormatError(`not a Coffer recovery kit: its first line must be "${KIT_HEADER}"`);
  let server: string | null = null;
  let fingerprint: string | null = null;
  const keys: Uint8Array[] = [];
  try {
    for (const { line, at } of lines.slice(1)) {
      const field = /^([a-z]+(?: \d+)?):\s*(.*)$/i.exec(line);
      if (!field) throw new KitFormatError(`line ${at} is not "server:", "recipient:" or "key <n>:"`);
      const [, name, value] = field as unknown as [string, string, string];
      const label = name.toLowerCase();
      if (label === 'server') server = value;
      else if (label === 'recipient') fingerprint = value.toLowerCase();
      else if (label === `key ${keys.length + 1}`) keys.push(keyFromWords(value, label, at));
      else throw new KitFormatError(`line ${at}: expected "key ${keys.length + 1}:", found "${name}:"`);
    }
    if (keys.length === 0) throw new KitFormatError('the kit holds no key line ("key 1: <24 words>")');
    const material = keyMaterialOf(keys);
    if (fingerprint !== null && deriveRecipient(material).fingerprint !== fingerprint) {
      wipe(material);
      throw new KitFormatError(`the kit's keys do not give its recipient ${fingerprint}: a key line is from another kit`);
    }
    return { server, material, keys: keys.length };
  } finally {
    for (const key of keys) wipe(key);
  }
}

function keyFromWords(value: string, label: string, at: number): Uint8Array {
  const words = value.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length !== WORDS_PER_KEY) throw new KitFormatError(`line ${at} (${label}) has ${words.length} words, not ${WORDS_PER_KEY}`);
  const unknown = words.findIndex((word) => !english.has(word));
  if (unknown >= 0) throw new KitFormatError(`line ${at} (${label}): word ${unknown + 1} "${words[unknown]}" is not a BIP-39 English word`);
  let key: Uint8Array;
  try {
    key = mnemonicToEntropy(words.join(' '), wordlist);
  } catch {
    throw new KitFormatError(`line ${at} (${label}): the words' checksum does not match (a word mistyped or swapped)`);
  }
  if (key.length !== KEY_BYTES) throw new KitFormatError(`line ${at} (${label}) is not a ${KEY_BYTES}-byte key`);
  return key;
}
