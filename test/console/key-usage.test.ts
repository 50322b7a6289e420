/**
 * The key-management code the console page shares with the CLI, on the docs/crypto.md vectors and on both
 * providers (sodium-native for the CLI, libsodium in WebAssembly for the page): reading a wrappedDek's form and
 * embedded fingerprint without a key, which key of a ring opens a data key (current or retired), every key's
 * recipient fingerprint, the kit's words read bare (as typed into the page) exactly as the kit text, and the
 * recovery rule of `coffer recover`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import * as native from '../../src/client/envelope.js';
import { createEnvelope } from '../../src/client/envelope-core.js';
import { dekForm, keyUse } from '../../src/client/key-usage.js';
import { KitFormatError, kitRefusal, parseKit, parseKitOrWords, parseKitWords } from '../../src/client/kit.js';
import * as web from '../../console/src/crypto/envelope.js';
import * as webKit from '../../console/src/crypto/kit.js';
import { parseVectors } from '../../console/src/crypto/selftest.js';
import { ROOT } from '../client/helpers.js';

const v = parseVectors(fs.readFileSync(path.join(ROOT, 'docs/crypto.md'), 'utf8')) as any;
const hex = (value: string) => Buffer.from(value, 'hex');

beforeAll(async () => {
  await web.ready;
});

describe('which key a backup uses', () => {
  it('reads the form and the embedded fingerprint from wrappedDek alone; anything else is null', () => {
    expect(dekForm(v.finalize.wrappedDek)).toEqual({ form: 'master' });
    expect(dekForm(v.keyring.finalize.wrappedDek)).toEqual({ form: 'master' });
    expect(dekForm(v.sealedDek.wrappedDek)).toEqual({ form: 'sealed', fingerprint: v.recipient.fingerprint });
    const sealed = Buffer.from(v.sealedDek.wrappedDek, 'base64');
    const wrongMagic = Buffer.from(sealed);
    wrongMagic[3] = 0x32; // "cxw2"
    for (const bad of [
      null,
      undefined,
      '',
      'not base64!',
      Buffer.alloc(47).toString('base64'),
      wrongMagic.toString('base64'),
      sealed.subarray(0, 1179).toString('base64'),
    ]) {
      expect(dekForm(bad)).toBeNull();
    }
  });

  it.each([
    ['sodium-native (the CLI)', createEnvelope(native.nodePrimitives)],
    ['libsodium.js (the console)', web],
  ] as const)("names the key of the ring that opens each form, with every key's recipient fingerprint, on %s", (_name, envelope) => {
    const ring = hex(v.keyring.plaintext);
    const fingerprints = envelope.keyFingerprints(ring);
    expect(fingerprints).toEqual([v.keyring.recipientFingerprint, v.recipient.fingerprint]);
    expect(envelope.keyFingerprints(hex(v.masterKey))).toEqual([v.recipient.fingerprint]);
    for (const [fields, keyIndex, form] of [
      [v.keyring.finalize, 0, 'master'], // wrapped with the current key, after the rekey
      [v.finalize, 1, 'master'], // wrapped with the older key, before it
      [v.sealedDek, 1, 'sealed'], // sealed to the older key's recipient
    ] as const) {
      const opened = envelope.openDek(ring, v.backupId, fields);
      expect(Buffer.from(opened.dek).toString('hex')).toBe(v.dek);
      expect({ keyIndex: opened.keyIndex, form: opened.form }).toEqual({ keyIndex, form });
      expect(keyUse(opened.form, opened.keyIndex, fingerprints)).toEqual({
        form,
        keyIndex,
        fingerprint: fingerprints[keyIndex],
        current: keyIndex === 0,
      });
    }
    // Another backup's id: no key opens it (the AD binds the id), whatever the form.
    for (const fields of [v.finalize, v.sealedDek])
      expect(() => envelope.openDek(ring, `${v.backupId}x`, fields)).toThrow(native.IntegrityError);
  });
});

describe('the kit, shared by the CLI and the page', () => {
  const words = (text: string) =>
    text
      .split('\n')
      .filter((line) => line.startsWith('key '))
      .map((line) => line.replace(/^key \d+: /, ''));

  it('bare words (any white space, any case, optional "key n:" labels) give the same keyring as the kit text, on both sides', () => {
    const [current, older] = words(v.kit.text) as [string, string];
    const fromText = parseKit(v.kit.text);
    expect(fromText.material.toString('hex')).toBe(v.keyring.plaintext);
    for (const typed of [
      `${current} ${older}`,
      `${current.toUpperCase()}\n\n  ${older.replaceAll(' ', '\n')}  `,
      `key 1: ${current}\nKey 2:${older}`,
    ]) {
      const read = parseKitWords(typed);
      expect(read).toMatchObject({ server: null, keys: 2 });
      expect(read.material.toString('hex')).toBe(v.keyring.plaintext);
      expect(Buffer.from(webKit.parseKitOrWords(typed).material).toString('hex')).toBe(v.keyring.plaintext);
    }
    expect(Buffer.from(webKit.parseKitOrWords(v.kit.text).material).toString('hex')).toBe(v.keyring.plaintext);
    expect(parseKitOrWords(current).material.toString('hex')).toBe(v.keyring.keys[0]);
  });

  it('refuses a wrong count, an unknown word and a broken checksum, naming the words at fault', () => {
    const [current, older] = words(v.kit.text) as [string, string];
    const list = current.split(' ');
    const cases: [string, RegExp][] = [
      ['', /no words/],
      [list.slice(0, 23).join(' '), /23 words: a kit has 24 words per key/],
      [`${current} ${older} abandon`, /49 words/],
      [[...list.slice(0, 3), 'coffer', ...list.slice(4)].join(' '), /words 1–24 \(key 1\): word 4 "coffer" is not a BIP-39 English word/],
      [
        `${current} ${[older.split(' ')[1], older.split(' ')[0], ...older.split(' ').slice(2)].join(' ')}`,
        /words 25–48 \(key 2\): the words' checksum does not match/,
      ],
    ];
    for (const [typed, message] of cases) {
      expect(() => parseKitWords(typed)).toThrow(message);
      expect(() => webKit.parseKitOrWords(typed)).toThrow(webKit.KitFormatError);
    }
    expect(() => parseKitWords(Array(65).fill(current).join(' '))).toThrow(
      new KitFormatError('the kit holds 65 keys; a vault holds at most 64'),
    );
  });

  it("`coffer recover`'s rule: none opened is another vault's kit; some, or no backup to check, needs force", () => {
    expect(kitRefusal(0, 3, false)).toBe('foreign');
    expect(kitRefusal(0, 3, true)).toBe('foreign');
    expect(kitRefusal(2, 3, false)).toBe('partial');
    expect(kitRefusal(2, 3, true)).toBeNull();
    expect(kitRefusal(0, 0, false)).toBe('unchecked');
    expect(kitRefusal(0, 0, true)).toBeNull();
    expect(kitRefusal(3, 3, false)).toBeNull();
  });
});
