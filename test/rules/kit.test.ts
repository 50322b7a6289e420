/**
 * The recovery kit's reader and the recovery rule (src/client/kit-core.ts, docs/crypto.md §1c), called directly with
 * the CLI's envelope: what it accepts, what it refuses and with which words, and that it wipes the keys it decoded
 * when it refuses. Killed mutants of these are counted by `npm run test:mutation`.
 */
import { entropyToMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english.js';
import { describe, expect, it } from 'vitest';
import { deriveRecipient, keyMaterialOf, masterKeys, newKey, wipe } from '../../src/client/envelope.js';
import { KIT_HEADER, KitFormatError, WORDS_PER_KEY, createKit, isKitText, kitRefusal } from '../../src/client/kit-core.js';
import { formatKit, parseKit, parseKitOrWords, parseKitWords } from '../../src/client/kit.js';

const keys = (n: number) => Array.from({ length: n }, () => newKey());
const words = (key: Uint8Array) => entropyToMnemonic(key, wordlist);
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const refusal = (read: () => unknown): string => {
  try {
    read();
  } catch (error) {
    expect(error).toBeInstanceOf(KitFormatError);
    return (error as Error).message;
  }
  throw new Error('accepted');
};

describe('the kit text', () => {
  it('reads back what it wrote: the server, every key in order, the recipient checked', () => {
    for (const n of [1, 2, 3]) {
      const material = keyMaterialOf(keys(n));
      const text = formatKit(material, 'https://backup.example');
      expect(text.split('\n').filter((line) => !line.startsWith('#'))).toEqual([
        KIT_HEADER,
        'server: https://backup.example',
        `recipient: ${deriveRecipient(material).fingerprint}`,
        ...masterKeys(material).map((key, i) => `key ${i + 1}: ${words(key)}`),
        '',
      ]);
      const kit = parseKit(text);
      expect(kit.server).toBe('https://backup.example');
      expect(kit.keys).toBe(n);
      expect(hex(kit.material)).toBe(hex(material));
    }
  });

  it('takes case, spacing, blank and comment lines and CRLF as a person may type them', () => {
    const [key] = keys(1);
    const material = keyMaterialOf([key!]);
    const text = [
      '# a comment',
      '',
      `  ${KIT_HEADER.toUpperCase()}  `,
      'SERVER:   https://x.example',
      `Recipient: ${deriveRecipient(material).fingerprint.toUpperCase()}`,
      `KEY 1:${words(key!).toUpperCase().replaceAll(' ', '   ')}`,
    ].join('\r\n');
    const kit = parseKit(text);
    expect(kit.server).toBe('https://x.example');
    expect(hex(kit.material)).toBe(hex(material));
    expect(parseKit(`${KIT_HEADER}\nkey 1: ${words(key!)}`)).toMatchObject({ server: null, keys: 1 });
  });

  it('refuses what it cannot use, naming the line at fault', () => {
    const [a, b] = keys(2);
    const line1 = `key 1: ${words(a!)}`;
    expect(refusal(() => parseKit(line1))).toBe(`not a Coffer recovery kit: its first line must be "${KIT_HEADER}"`);
    expect(refusal(() => parseKit(`# only\n${line1}\n${KIT_HEADER}`))).toMatch(/^not a Coffer recovery kit/);
    expect(refusal(() => parseKit(`${KIT_HEADER}\nserver: x`))).toBe('the kit holds no key line ("key 1: <24 words>")');
    expect(refusal(() => parseKit(`${KIT_HEADER}\nthis is no field`))).toBe('line 2 is not "server:", "recipient:" or "key <n>:"');
    expect(refusal(() => parseKit(`${KIT_HEADER}\nkey 2: ${words(a!)}`))).toBe('line 2: expected "key 1:", found "key 2:"');
    expect(refusal(() => parseKit(`${KIT_HEADER}\n${line1}\nkey 3: ${words(b!)}`))).toBe('line 3: expected "key 2:", found "key 3:"');
    expect(refusal(() => parseKit(`${KIT_HEADER}\nfoo: bar`))).toBe('line 2: expected "key 1:", found "foo:"');
    const short = words(a!).split(' ').slice(1).join(' ');
    expect(refusal(() => parseKit(`${KIT_HEADER}\nkey 1: ${short}`))).toBe(
      `line 2 (key 1) has ${WORDS_PER_KEY - 1} words, not ${WORDS_PER_KEY}`,
    );
    const typo = words(a!).split(' ');
    typo[4] = 'notaword';
    expect(refusal(() => parseKit(`${KIT_HEADER}\nkey 1: ${typo.join(' ')}`))).toBe(
      'line 2 (key 1): word 5 "notaword" is not a BIP-39 English word',
    );
    const swapped = words(a!).split(' ');
    [swapped[0], swapped[1]] = [swapped[1]!, swapped[0]!];
    if (swapped.join(' ') !== words(a!)) {
      expect(refusal(() => parseKit(`${KIT_HEADER}\nkey 1: ${swapped.join(' ')}`))).toBe(
        "line 2 (key 1): the words' checksum does not match (a word mistyped or swapped)",
      );
    }
    // 12 valid words are a 16-byte key: the right count is checked before the size, so pad to 24 with a second phrase.
    const twelve = entropyToMnemonic(new Uint8Array(16).fill(7), wordlist);
    expect(refusal(() => parseKit(`${KIT_HEADER}\nkey 1: ${twelve}`))).toBe('line 2 (key 1) has 12 words, not 24');
    const other = deriveRecipient(keyMaterialOf([b!])).fingerprint;
    expect(refusal(() => parseKit(`${KIT_HEADER}\nrecipient: ${other}\n${line1}`))).toBe(
      `the kit's keys do not give its recipient ${other}: a key line is from another kit`,
    );
    const many = keys(65);
    expect(refusal(() => parseKit([KIT_HEADER, ...many.map((key, i) => `key ${i + 1}: ${words(key)}`)].join('\n')))).toBe(
      'the kit holds 65 keys; a vault holds at most 64',
    );
  });

  it('knows a whole kit from bare words by its header line, anywhere, in any case', () => {
    expect(isKitText(`# x\n  ${KIT_HEADER.toUpperCase()} \nkey 1: a`)).toBe(true);
    expect(isKitText('abandon ability able')).toBe(false);
    expect(isKitText(`${KIT_HEADER} v2`)).toBe(false);
  });
});

describe('the bare words of a kit', () => {
  it('reads 24 words per key, with or without labels, across lines', () => {
    const [a, b] = keys(2);
    const kit = parseKitWords(`KEY 1: ${words(a!)}\n\n key 2 :\n${words(b!).toUpperCase()}`);
    expect(kit).toMatchObject({ server: null, keys: 2 });
    expect(hex(kit.material)).toBe(hex(keyMaterialOf([a!, b!])));
    expect(hex(parseKitOrWords(words(a!)).material)).toBe(hex(keyMaterialOf([a!])));
    expect(parseKitOrWords(`${KIT_HEADER}\nserver: s\nkey 1: ${words(a!)}`).server).toBe('s');
  });

  it('refuses no words, a count that is not a multiple of 24, and names the words at fault', () => {
    const [a, b] = keys(2);
    expect(refusal(() => parseKitWords('  \n '))).toBe('no words: type the 24 words of each key line of the kit');
    expect(refusal(() => parseKitWords(`${words(a!)} abandon`))).toBe('25 words: a kit has 24 words per key (24, 48, …)');
    const bad = words(b!).split(' ');
    bad[23] = 'zzz';
    expect(refusal(() => parseKitWords(`${words(a!)} ${bad.join(' ')}`))).toBe(
      'words 25–48 (key 2): word 24 "zzz" is not a BIP-39 English word',
    );
  });

  it('wipes every key it decoded when it refuses, and the decoded keys once the material is built', () => {
    const wiped: Uint8Array[] = [];
    const recording = createKit({
      deriveRecipient,
      keyMaterialOf,
      masterKeys,
      wipe: (...buffers) => {
        for (const b of buffers) if (b) wiped.push(new Uint8Array(b));
        wipe(...buffers);
      },
    });
    const [a, b] = keys(2);
    const bad = words(b!).split(' ');
    bad[0] = 'zzz';
    expect(() => recording.parseKitWords(`${words(a!)} ${bad.join(' ')}`)).toThrow(KitFormatError);
    expect(wiped.map(hex)).toEqual([hex(a!)]);
    wiped.length = 0;
    expect(() => recording.parseKit(`${KIT_HEADER}\nkey 1: ${words(a!)}\nkey 2: ${bad.join(' ')}`)).toThrow(KitFormatError);
    expect(wiped.map(hex)).toEqual([hex(a!)]);
    wiped.length = 0;
    const kit = recording.parseKit(`${KIT_HEADER}\nkey 1: ${words(a!)}\nkey 2: ${words(b!)}`);
    expect(wiped.map(hex)).toEqual([hex(a!), hex(b!)]);
    expect(hex(kit.material)).toBe(hex(keyMaterialOf([a!, b!])));
  });
});

describe('kitRefusal: may a kit replace the vault wrapping?', () => {
  it('needs at least one opened backup; all of them, or an empty vault, only when forced', () => {
    const table = [
      [0, 0, false, 'unchecked'],
      [0, 0, true, null],
      [0, 3, false, 'foreign'],
      [0, 3, true, 'foreign'],
      [2, 3, false, 'partial'],
      [2, 3, true, null],
      [3, 3, false, null],
      [3, 3, true, null],
      [1, 1, false, null],
    ] as const;
    for (const [opened, checked, force, expected] of table)
      expect(kitRefusal(opened, checked, force), `${opened}/${checked} force=${force}`).toBe(expected);
  });
});
