/**
 * Crypto envelope v1: the test vectors published in docs/crypto.md, the secretstream framing at chunk
 * boundaries, and loud failures for a wrong passphrase, a flipped byte, truncation, reordering and swapped keys.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import zlib from 'node:zlib';
import { ml_kem768_x25519 } from '@noble/post-quantum/hybrid.js';
import { bech32m } from '@scure/base';
import sodium from 'sodium-native';
import { wordlist } from '@scure/bip39/wordlists/english.js';
import { describe, expect, it } from 'vitest';
import { SecretStreamWriter } from '../../src/client/envelope-core.js';
import {
  AEAD_ABYTES,
  CHUNK_BYTES,
  DecryptStream,
  EncryptStream,
  IntegrityError,
  NewerFormatError,
  KDF_PROFILES,
  NONCE_BYTES,
  SALT_BYTES,
  STREAM_ABYTES,
  STREAM_HEADER_BYTES,
  RECIPIENT,
  RecipientFormatError,
  SEALED_DEK_BYTES,
  ciphertextSize,
  deriveKek,
  addMasterKey,
  deriveRecipient,
  masterKeys,
  newKey,
  nodePrimitives,
  parseRecipient,
  sealDek,
  openMetadata,
  randomBytes,
  sealMetadata,
  unwrapDek,
  unwrapMasterKey,
  wrapDek,
  wrapMasterKey,
  type BackupMetadata,
} from '../../src/client/envelope.js';
import { TAG_FINAL, TAG_MESSAGE } from '../../src/client/envelope-core.js';
import { formatKit, parseKit } from '../../src/client/kit.js';
import { ROOT } from './helpers.js';
import { lacking } from '../helpers/required.js';

const DOC = path.join(ROOT, 'docs/crypto.md');

function loadVectors() {
  const text = fs.readFileSync(DOC, 'utf8');
  const match = /<!-- test-vectors[^>]*-->\s*```json\n([\s\S]*?)\n```/.exec(text);
  if (!match) throw new Error('docs/crypto.md has no test-vectors block');
  return JSON.parse(match[1]!);
}

const hex = (value: string) => Buffer.from(value, 'hex');
const encrypt = (key: Buffer, plain: Buffer) => buffer(Readable.from(plain.length ? [plain] : []).pipe(new EncryptStream(key)));
const decrypt = (key: Buffer, sealed: Buffer) => buffer(Readable.from(sealed.length ? [sealed] : []).pipe(new DecryptStream(key)));

/** Feeds `sealed` in pieces of `piece` bytes (exercises framing across arbitrary chunk splits). */
function decryptInPieces(key: Buffer, sealed: Buffer, piece: number) {
  const pieces: Buffer[] = [];
  for (let i = 0; i < sealed.length; i += piece) pieces.push(sealed.subarray(i, i + piece));
  return buffer(Readable.from(pieces).pipe(new DecryptStream(key)));
}

describe('docs/crypto.md test vectors', () => {
  const v = loadVectors();
  const kdf = { salt: Buffer.from(v.kdf.salt, 'base64'), opslimit: v.kdf.opslimit, memlimit: v.kdf.memlimit };

  it('derives the KEK with Argon2id13 from the NFC-normalized passphrase', async () => {
    expect(v.passphrase).not.toBe(v.passphrase.normalize('NFC')); // the vector is given in NFD on purpose
    expect(Buffer.from(await deriveKek(v.passphrase, kdf)).toString('hex')).toBe(v.kek);
    expect(Buffer.from(await deriveKek(v.passphrase.normalize('NFC'), kdf)).toString('hex')).toBe(v.kek);
  });

  it('wraps the master key into exactly the published bootstrap body, and unwraps it', async () => {
    const vault = await wrapMasterKey(hex(v.masterKey), v.passphrase, kdf, hex(v.wrappedMasterKeyNonce));
    expect(vault).toEqual(v.vault);
    expect(Buffer.from(await unwrapMasterKey(v.vault, v.passphrase)).toString('hex')).toBe(v.masterKey);
    await expect(unwrapMasterKey(v.vault, 'not the passphrase')).rejects.toBeInstanceOf(IntegrityError);
  });

  it('wraps the DEK bound to the backup id, and seals the metadata', () => {
    const masterKey = hex(v.masterKey);
    const dek = hex(v.dek);
    const metadata = JSON.parse(v.metadataJson) as BackupMetadata;
    expect({
      ...wrapDek(masterKey, v.backupId, dek, hex(v.wrappedDekNonce)),
      ...sealMetadata(dek, v.backupId, metadata, hex(v.encryptedMetadataNonce)),
    }).toEqual(v.finalize);
    expect(Buffer.from(unwrapDek(masterKey, v.backupId, v.finalize)).toString('hex')).toBe(v.dek);
    expect(openMetadata(dek, v.backupId, v.finalize)).toEqual(metadata);
    const otherId = v.backupId.replace(/1$/, '2');
    expect(() => unwrapDek(masterKey, otherId, v.finalize)).toThrow(IntegrityError);
    expect(() => openMetadata(dek, otherId, v.finalize)).toThrow(IntegrityError);
  });

  it('derives the recipient from the master key: BLAKE2b KDF seed, X-Wing public key, Bech32m string, fingerprint', () => {
    const seed = Buffer.alloc(32);
    sodium.crypto_kdf_derive_from_key(seed, 1, Buffer.from('cofferxw'), hex(v.masterKey));
    expect(seed.toString('hex')).toBe(v.recipient.seed);
    const publicKey = ml_kem768_x25519.keygen(seed).publicKey;
    expect(Buffer.from(publicKey).toString('hex')).toBe(v.recipient.publicKey);
    const recipient = deriveRecipient(hex(v.masterKey));
    expect(Buffer.from(recipient.publicKey).toString('hex')).toBe(v.recipient.publicKey);
    expect(recipient.text).toBe(v.recipient.text);
    expect(recipient.text.startsWith('coffer1')).toBe(true);
    const digest = createHash('sha256').update(publicKey).digest('hex');
    expect(recipient.fingerprint).toBe(digest.slice(0, 16).match(/.{4}/g)!.join('-'));
    expect(recipient.fingerprint).toBe(v.recipient.fingerprint);
    const parsed = parseRecipient(`  ${v.recipient.text.toUpperCase()}\n`);
    expect(Buffer.from(parsed.publicKey).toString('hex')).toBe(v.recipient.publicKey);
    expect(parsed.fingerprint).toBe(v.recipient.fingerprint);
  });

  it('seals the DEK to the recipient (fixed eseed and nonce) into exactly the published wrappedDek, and unseals it', () => {
    const recipient = parseRecipient(v.recipient.text);
    const sealed = sealDek(recipient, v.backupId, hex(v.dek), Buffer.from(v.sealedDek.wrappedDekNonce, 'base64'), hex(v.sealedDek.eseed));
    expect(sealed).toEqual({ wrappedDek: v.sealedDek.wrappedDek, wrappedDekNonce: v.sealedDek.wrappedDekNonce });
    const bytes = Buffer.from(sealed.wrappedDek, 'base64');
    expect(bytes.length).toBe(SEALED_DEK_BYTES);
    expect(bytes.subarray(0, 4).toString()).toBe('cxw1');
    expect(bytes.subarray(4, 12).toString('hex')).toBe(v.recipient.fingerprint.replaceAll('-', ''));
    expect(bytes.subarray(12, 1132).toString('hex')).toBe(v.sealedDek.xwingCiphertext);
    const ss = Buffer.from(ml_kem768_x25519.decapsulate(hex(v.sealedDek.xwingCiphertext), hex(v.recipient.seed)));
    expect(ss.toString('hex')).toBe(v.sealedDek.sharedSecret);
    const box = Buffer.alloc(48);
    sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(
      box,
      hex(v.dek),
      Buffer.from(v.sealedDek.ad),
      null,
      Buffer.from(v.sealedDek.wrappedDekNonce, 'base64'),
      ss,
    );
    expect(bytes.subarray(1132).equals(box)).toBe(true);
    expect(Buffer.from(unwrapDek(hex(v.masterKey), v.backupId, v.sealedDek)).toString('hex')).toBe(v.dek);
    expect(() => unwrapDek(hex(v.masterKey), v.backupId.replace(/1$/, '2'), v.sealedDek)).toThrow(/does not belong to this backup/);
    expect(() => unwrapDek(newKey(), v.backupId, v.sealedDek)).toThrow(
      new RegExp(`sealed to another recipient ${v.recipient.fingerprint}`),
    );
  });

  it('the keyring vector (§1b): exact bytes, every older form read with the ring, new material from the current key', async () => {
    const k = v.keyring;
    const ring = hex(k.plaintext);
    expect(ring.subarray(0, 5).toString('latin1')).toBe('ckr1\x02');
    expect(masterKeys(ring).map((key) => Buffer.from(key).toString('hex'))).toEqual(k.keys);
    expect(k.keys[1]).toBe(v.masterKey);
    expect(await wrapMasterKey(ring, v.passphrase, kdf, hex(k.wrappedMasterKeyNonce))).toEqual(k.vault);
    expect(Buffer.from(await unwrapMasterKey(k.vault, v.passphrase)).toString('hex')).toBe(k.plaintext);
    expect(wrapDek(ring, v.backupId, hex(v.dek), Buffer.from(k.finalize.wrappedDekNonce, 'base64'))).toEqual(k.finalize);
    for (const form of [k.finalize, v.finalize, v.sealedDek]) {
      expect(Buffer.from(unwrapDek(ring, v.backupId, form)).toString('hex')).toBe(v.dek);
    }
    expect(() => unwrapDek(hex(v.masterKey), v.backupId, k.finalize)).toThrow(IntegrityError);
    expect(deriveRecipient(ring).fingerprint).toBe(k.recipientFingerprint);
    expect(deriveRecipient(hex(k.keys[0])).fingerprint).toBe(k.recipientFingerprint);
    // Another ring without the sealing key names the embedded fingerprint.
    expect(() => unwrapDek(addMasterKey(newKey()), v.backupId, v.sealedDek)).toThrow(
      new RegExp(`sealed to another recipient ${v.recipient.fingerprint}, not this vault's .* nor any of its 1 older keys`),
    );
  });

  it('the kit vector (§1c): exact text, BIP-39 words computed independently, read back to the keyring', () => {
    const ring = hex(v.keyring.plaintext);
    expect(formatKit(ring, v.kit.server)).toBe(v.kit.text);
    // BIP-39 by hand: 256 bits ‖ SHA-256(key)[0], 24 × 11 bits big-endian into the English wordlist.
    const words = (key: Buffer) => {
      const bits = [...key, createHash('sha256').update(key).digest()[0]!].map((b) => b.toString(2).padStart(8, '0')).join('');
      return Array.from({ length: 24 }, (_, i) => wordlist[parseInt(bits.slice(i * 11, i * 11 + 11), 2)]).join(' ');
    };
    expect(v.kit.text).toContain(`\nkey 1: ${words(hex(v.keyring.keys[0]))}\nkey 2: ${words(hex(v.keyring.keys[1]))}\n`);
    const read = parseKit(v.kit.text.toUpperCase().replace('COFFER RECOVERY KIT V1', '  coffer recovery kit v1  '));
    expect(read.material.toString('hex')).toBe(v.keyring.plaintext);
    expect(read.keys).toBe(2);
    // Key lines from different kits do not pass the recipient line.
    expect(() => parseKit(v.kit.text.replace(/key 1: .*\n/, `key 1: ${words(hex(v.masterKey))}\n`))).toThrow(/do not give its recipient/);
  });

  it('refuses key material that is neither a 32-byte key nor a well-formed keyring, also after a verified unwrap', async () => {
    const ring = hex(v.keyring.plaintext);
    const bad = [
      Buffer.alloc(31),
      Buffer.alloc(33),
      Buffer.concat([Buffer.from('ckr2\x01'), Buffer.alloc(32)]),
      Buffer.concat([Buffer.from('ckr1\x00')]),
      Buffer.concat([Buffer.from('ckr1\x02'), Buffer.alloc(32)]), // count says 2, holds 1
      Buffer.concat([Buffer.from('ckr1\x01'), Buffer.alloc(64)]), // count says 1, holds 2
      Buffer.concat([Buffer.from('ckr1'), Buffer.from([65]), Buffer.alloc(65 * 32)]),
      ring.subarray(0, ring.length - 1),
    ];
    for (const material of bad) {
      expect(() => masterKeys(material)).toThrow(IntegrityError);
      await expect(wrapMasterKey(material, v.passphrase, kdf)).rejects.toThrow(IntegrityError);
    }
    // A box that verifies but holds a malformed ring (only a writer with the KEK could make one) is still refused.
    const kek = await deriveKek(v.passphrase, kdf);
    const forged = Buffer.concat([Buffer.from('ckr1\x02'), Buffer.alloc(32)]);
    const box = Buffer.alloc(forged.length + 16);
    const nonce = Buffer.alloc(24, 7);
    sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(box, forged, Buffer.from('coffer/v1/master'), null, nonce, kek);
    const vault = { ...v.vault, wrappedMasterKey: box.toString('base64'), wrappedMasterKeyNonce: nonce.toString('base64') };
    await expect(unwrapMasterKey(vault, v.passphrase)).rejects.toThrow(/neither a 32-byte master key nor a keyring/);
    // A "ckr1" ring whose count and length disagree comes from a faulty writer, not a newer one.
    const faulty = await unwrapMasterKey(vault, v.passphrase).catch((error: unknown) => error);
    expect(faulty).toBeInstanceOf(IntegrityError);
    expect(faulty).not.toBeInstanceOf(NewerFormatError);
    // A full ring of 64 takes no more keys.
    let full: Uint8Array = hex(v.masterKey);
    for (let n = 1; n < 64; n += 1) full = addMasterKey(full);
    expect(masterKeys(full).length).toBe(64);
    expect(() => addMasterKey(full)).toThrow(/maximum of 64 keys/);
  });

  it('the one rule of §1b for an opened vault plaintext: which forms are exit 4 (integrity) and which exit 1 (newer coffer)', async () => {
    // docs/crypto.md §1b's table, row by row, through a box that verifies (a writer with the KEK made it).
    const min = { salt: Buffer.alloc(16, 9), ...KDF_PROFILES.min };
    const kek = await deriveKek(v.passphrase, min);
    const sealedVault = (plaintext: Buffer) => {
      const box = Buffer.alloc(plaintext.length + 16);
      const nonce = Buffer.alloc(24, 3);
      sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(box, plaintext, Buffer.from('coffer/v1/master'), null, nonce, kek);
      const kdfFields = { salt: min.salt.toString('base64'), opslimit: min.opslimit, memlimit: min.memlimit };
      return {
        cryptoVersion: 'v1',
        kdf: kdfFields,
        wrappedMasterKey: box.toString('base64'),
        wrappedMasterKeyNonce: nonce.toString('base64'),
      };
    };
    const ring = (n: number, count = n) => Buffer.concat([Buffer.from('ckr1'), Buffer.from([count]), Buffer.alloc(32 * n, 1)]);
    const rows: [string, Buffer, 'opens' | 'integrity' | 'newer'][] = [
      ['exactly 32 bytes', Buffer.alloc(32, 2), 'opens'],
      ['32 bytes that start like a ring', Buffer.concat([Buffer.from('ckr2'), Buffer.alloc(28)]), 'opens'],
      ['ckr1, n = 1', ring(1), 'opens'],
      ['ckr1, n = 64', ring(64), 'opens'],
      ['ckr1, n = 0', ring(0), 'integrity'],
      ['ckr1 alone', Buffer.from('ckr1'), 'integrity'],
      ['ckr1, count 2 holding 1', ring(1, 2), 'integrity'],
      ['ckr1, count 1 holding 2', ring(2, 1), 'integrity'],
      ['ckr1, count 66 holding 65', ring(65, 66), 'integrity'],
      ['ckr1, n = 65, exactly 5 + 32n', ring(65), 'newer'],
      ['ckr2', Buffer.concat([Buffer.from('ckr2\x01'), Buffer.alloc(32)]), 'newer'],
      ['ckr9 of any length', Buffer.from('ckr9'), 'newer'],
      ['no known form (40 bytes)', Buffer.alloc(40, 3), 'newer'],
      ['another magic (abc1)', Buffer.concat([Buffer.from('abc1'), Buffer.alloc(40)]), 'newer'],
      ['33 bytes', Buffer.alloc(33), 'newer'],
    ];
    for (const [name, plaintext, expected] of rows) {
      const outcome = await unwrapMasterKey(sealedVault(plaintext), v.passphrase).then(
        () => 'opens',
        (error: unknown) => (error instanceof NewerFormatError ? 'newer' : error instanceof IntegrityError ? 'integrity' : String(error)),
      );
      expect(outcome, name).toBe(expected);
    }
    // Before Argon2id: a wrappedMasterKey of 16 bytes or fewer, or over 4,096, is a wrong passphrase (exit 4).
    for (const length of [16, 4097]) {
      const vault = { ...sealedVault(Buffer.alloc(32)), wrappedMasterKey: Buffer.alloc(length).toString('base64') };
      await expect(unwrapMasterKey(vault, v.passphrase), String(length)).rejects.toThrow(/^wrong passphrase/);
    }
    kek.fill(0);
  });

  it('decrypts the archive vector to the published tar', async () => {
    const sealed = Buffer.from(v.archive.ciphertext, 'base64');
    const metadata = JSON.parse(v.metadataJson) as BackupMetadata;
    expect(sealed.length).toBe(metadata.ciphertextSizeBytes);
    const tar = zlib.gunzipSync(await decrypt(hex(v.dek), sealed));
    expect(tar.length).toBe(v.archive.plaintextSizeBytes);
    expect(createHash('sha256').update(tar).digest('hex')).toBe(v.archive.plaintextSha256);
    expect(tar.subarray(0, 9).toString()).toBe('hello.txt');
    expect(tar.subarray(512, 512 + 14).toString()).toBe(v.archive.files['hello.txt']);
    expect(ciphertextSize(sealed.length - STREAM_HEADER_BYTES - STREAM_ABYTES)).toBe(sealed.length);
  });

  const python = spawnSync('python3', ['-c', 'import ctypes.util,sys; sys.exit(0 if ctypes.util.find_library("sodium") else 1)']);
  const noPython = lacking(python.status === 0, 'python-libsodium');
  it.skipIf(noPython)('match an independent libsodium build (system libsodium through Python ctypes)', () => {
    // The kit's word encoding is checked there too, with the BIP-39 English wordlist given on stdin.
    const run = spawnSync('python3', [path.join(ROOT, 'test/client/vectors_libsodium.py'), DOC], {
      encoding: 'utf8',
      input: `${wordlist.join('\n')}\n`,
    });
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('ok');
  });
});

describe("X-Wing (the recipient KEM) against the draft's published vectors", () => {
  // test/fixtures/xwing-test-vectors.json: draft-connolly-cfrg-xwing-kem reference vectors (source named in the file).
  const fixture = JSON.parse(fs.readFileSync(path.join(ROOT, 'test/fixtures/xwing-test-vectors.json'), 'utf8'));
  it.each(fixture.vectors as { seed: string; pk: string; eseed: string; ct: string; ss: string }[])(
    'keygen, deterministic encapsulation and decapsulation match ($seed)',
    ({ seed, pk, eseed, ct, ss }) => {
      const { publicKey } = ml_kem768_x25519.keygen(hex(seed));
      expect(Buffer.from(publicKey).toString('hex')).toBe(pk);
      const { cipherText, sharedSecret } = ml_kem768_x25519.encapsulate(hex(pk), hex(eseed));
      expect(Buffer.from(cipherText).toString('hex')).toBe(ct);
      expect(Buffer.from(sharedSecret).toString('hex')).toBe(ss);
      expect(Buffer.from(ml_kem768_x25519.decapsulate(hex(ct), hex(seed))).toString('hex')).toBe(ss);
      expect([publicKey.length, cipherText.length]).toEqual([RECIPIENT.publicKeyBytes, RECIPIENT.ciphertextBytes]);
    },
  );
});

describe('recipients and sealed data keys', () => {
  const masterKey = newKey();
  const backupId = '01a20000-0000-7000-8000-0000000000cc';

  it('a host with only the recipient seals a DEK the master key unseals; every other key and backup is refused', () => {
    const recipient = parseRecipient(deriveRecipient(masterKey).text);
    const dek = newKey();
    const sealed = sealDek(recipient, backupId, dek);
    expect(unwrapDek(masterKey, backupId, sealed).equals(dek)).toBe(true);
    expect(sealDek(recipient, backupId, dek).wrappedDek).not.toBe(sealed.wrappedDek); // fresh encapsulation each time
    expect(() => unwrapDek(masterKey, '01a20000-0000-7000-8000-0000000000dd', sealed)).toThrow(IntegrityError);
    // Re-sealed to another vault's recipient (a hostile server's own key): refused by fingerprint, before decapsulation.
    const foreign = deriveRecipient(newKey());
    expect(() => unwrapDek(masterKey, backupId, sealDek(foreign, backupId, dek))).toThrow(
      `sealed to another recipient ${foreign.fingerprint}`,
    );
    // The fingerprint rewritten to ours does not help: the AD (and the KEM) no longer match.
    const forged = Buffer.from(sealDek(foreign, backupId, dek).wrappedDek, 'base64');
    Buffer.from(recipient.fingerprint.replaceAll('-', ''), 'hex').copy(forged, 4);
    expect(() => unwrapDek(masterKey, backupId, { ...sealed, wrappedDek: forged.toString('base64') })).toThrow(/does not belong/);
  });

  it('the encapsulation that checked a parsed recipient seals its first DEK only, and only to the key it checked', () => {
    const recipient = parseRecipient(deriveRecipient(masterKey).text);
    const dek = newKey();
    const first = sealDek(recipient, backupId, dek);
    const second = sealDek(recipient, backupId, dek);
    expect(first.wrappedDek).not.toBe(second.wrappedDek);
    for (const sealed of [first, second]) expect(unwrapDek(masterKey, backupId, sealed).equals(dek)).toBe(true);
    // A recipient whose key was swapped after the check: sealed to the key it now holds.
    const otherKey = newKey();
    const swapped = parseRecipient(deriveRecipient(masterKey).text);
    swapped.publicKey = deriveRecipient(otherKey).publicKey;
    swapped.fingerprint = deriveRecipient(otherKey).fingerprint;
    expect(unwrapDek(otherKey, backupId, sealDek(swapped, backupId, dek)).equals(dek)).toBe(true);
  });

  it('tells the two forms apart by exact length and magic; anything else is an IntegrityError', () => {
    const recipient = deriveRecipient(masterKey);
    const sealed = sealDek(recipient, backupId, newKey());
    const bytes = Buffer.from(sealed.wrappedDek, 'base64');
    // Another version's magic is named as such (a newer coffer, or an altered key), and is still an IntegrityError.
    const later = Buffer.concat([Buffer.from('cxw2'), bytes.subarray(4)]).toString('base64');
    expect(() => unwrapDek(masterKey, backupId, { ...sealed, wrappedDek: later })).toThrow(NewerFormatError);
    expect(() => unwrapDek(masterKey, backupId, { ...sealed, wrappedDek: later })).toThrow(IntegrityError);
    expect(() => unwrapDek(masterKey, backupId, { ...sealed, wrappedDek: later })).toThrow(
      /"cxw2", 1180 bytes\): it was made by a newer coffer/,
    );
    const variants = [
      Buffer.concat([Buffer.from('xyz!'), bytes.subarray(4)]), // no version magic at all
      bytes.subarray(0, SEALED_DEK_BYTES - 1), // one byte short
      Buffer.concat([bytes, Buffer.alloc(1)]), // one byte long
      Buffer.alloc(49),
      Buffer.alloc(4096),
    ];
    for (const variant of variants) {
      expect(() => unwrapDek(masterKey, backupId, { ...sealed, wrappedDek: variant.toString('base64') })).toThrow(/does not belong/);
    }
    const flipped = Buffer.from(bytes);
    flipped[600]! ^= 1; // inside the X-Wing ciphertext: implicit rejection, then the AEAD tag fails
    expect(() => unwrapDek(masterKey, backupId, { ...sealed, wrappedDek: flipped.toString('base64') })).toThrow(IntegrityError);
  });

  it('refuses a damaged or foreign recipient string with a clear reason', () => {
    const { text } = deriveRecipient(masterKey);
    const swap = (at: number) => text.slice(0, at) + (text[at] === 'q' ? 'p' : 'q') + text.slice(at + 1);
    expect(() => parseRecipient(swap(100))).toThrow(RecipientFormatError);
    expect(() => parseRecipient(swap(100))).toThrow(/checksum does not match/);
    expect(() => parseRecipient(text.slice(0, -1))).toThrow(/checksum/);
    expect(() => parseRecipient(`${text.slice(0, 50)}B${text.slice(51)}`)).toThrow(RecipientFormatError);
    expect(() => parseRecipient('age1pq1xyz')).toThrow(/must start with "coffer1"/);
    expect(() => parseRecipient('')).toThrow(/must start with "coffer1"/);
    const short = 'coffer1' + text.slice(7, 107);
    expect(() => parseRecipient(short)).toThrow(RecipientFormatError);
    // A well-formed string of 1,216 bytes that is no ML-KEM key (coefficients ≥ q): refused before any upload.
    const notAKey = bech32m.encode('coffer', bech32m.toWords(new Uint8Array(RECIPIENT.publicKeyBytes).fill(0xff)), false);
    expect(() => parseRecipient(notAKey)).toThrow(/not a valid X-Wing public key/);
    // Non-zero padding bits under a matching checksum: their own reason, not "damaged".
    const words = [...bech32m.decode(text as `${string}1${string}`, false).words];
    words[words.length - 1]! |= 2;
    const padded = bech32m.encode('coffer', words, false);
    expect(() => parseRecipient(padded)).toThrow(/last character has non-zero padding bits/);
    expect(() => parseRecipient(padded)).not.toThrow(/checksum does not match/);
    // One more 5-bit word: 1,947 characters are not 1,216 bytes (nor excess padding read as a key).
    const longer = bech32m.encode('coffer', [...bech32m.decode(text as `${string}1${string}`, false).words, 0], false);
    expect(() => parseRecipient(longer)).toThrow(
      /holds 1947 data characters \(1216 bytes\), not an X-Wing public key \(1946 characters, 1216 bytes\)/,
    );
    expect(() => parseRecipient(`${text.slice(0, 9)}${text.slice(9).toUpperCase()}`)).toThrow(/mixes upper and lower case/);
    expect(parseRecipient(`\t ${text.toUpperCase()} \r\n`).text).toBe(text);
  });

  it('states the sizes the format documents', () => {
    expect(SEALED_DEK_BYTES).toBe(1180);
    const fp = Buffer.alloc(32);
    nodePrimitives.sha256(fp, Buffer.from('abc'));
    expect(fp.toString('hex')).toBe(createHash('sha256').update('abc').digest('hex'));
  });
});

describe('envelope constants', () => {
  it("are libsodium's (the shared core states them as numbers; sodium-native names them)", () => {
    expect([SALT_BYTES, NONCE_BYTES, AEAD_ABYTES, STREAM_HEADER_BYTES, STREAM_ABYTES, TAG_MESSAGE, TAG_FINAL]).toEqual([
      sodium.crypto_pwhash_SALTBYTES,
      sodium.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES,
      sodium.crypto_aead_xchacha20poly1305_ietf_ABYTES,
      sodium.crypto_secretstream_xchacha20poly1305_HEADERBYTES,
      sodium.crypto_secretstream_xchacha20poly1305_ABYTES,
      sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE,
      sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL,
    ]);
    expect(KDF_PROFILES).toEqual({
      min: { opslimit: sodium.crypto_pwhash_OPSLIMIT_MIN, memlimit: sodium.crypto_pwhash_MEMLIMIT_MIN },
      interactive: { opslimit: sodium.crypto_pwhash_OPSLIMIT_INTERACTIVE, memlimit: sodium.crypto_pwhash_MEMLIMIT_INTERACTIVE },
      moderate: { opslimit: sodium.crypto_pwhash_OPSLIMIT_MODERATE, memlimit: sodium.crypto_pwhash_MEMLIMIT_MODERATE },
      sensitive: { opslimit: sodium.crypto_pwhash_OPSLIMIT_SENSITIVE, memlimit: sodium.crypto_pwhash_MEMLIMIT_SENSITIVE },
    });
  });
});

describe('secretstream archive framing', () => {
  const key = newKey();
  const sizes = [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES, 3 * CHUNK_BYTES + 12_345];

  it.each(sizes)('round-trips %i bytes with the exact predicted size', async (size) => {
    const plain = randomBytes(size);
    const sealed = await encrypt(key, plain);
    expect(sealed.length).toBe(ciphertextSize(size));
    expect((await decrypt(key, sealed)).equals(plain)).toBe(true);
    expect((await decryptInPieces(key, sealed, 7_777)).equals(plain)).toBe(true);
  });

  it('seals the same frames whatever pieces it is fed (whole chunks sealed where they lie, several frames emitted at once)', () => {
    // A fixed header: the push state init_pull derives from it is the one init_push would have made.
    const header = Buffer.alloc(STREAM_HEADER_BYTES, 0x5a);
    const fixed = {
      ...nodePrimitives,
      streamInitPush: (into: Buffer, k: Uint8Array) => (header.copy(into), nodePrimitives.streamInitPull(header, k)),
    };
    const input = randomBytes(5 * CHUNK_BYTES + 777);
    const sealIn = (cuts: number[]) => {
      const writer = new SecretStreamWriter(fixed, key);
      const out: Buffer[] = [];
      let at = 0;
      for (const cut of [...cuts, input.length]) {
        writer.push(input.subarray(at, Math.max(at, cut)), (b) => out.push(b));
        at = Math.max(at, cut);
      }
      writer.finish((b) => out.push(b));
      return Buffer.concat(out);
    };
    const whole = sealIn([]);
    expect(whole.length).toBe(ciphertextSize(input.length));
    for (const cuts of [
      [1],
      [CHUNK_BYTES],
      [CHUNK_BYTES, 2 * CHUNK_BYTES, 2 * CHUNK_BYTES, 4 * CHUNK_BYTES],
      [CHUNK_BYTES - 1, CHUNK_BYTES + 1, 3 * CHUNK_BYTES + 5],
      [7_777, 100_000, 5 * CHUNK_BYTES],
      [5 * CHUNK_BYTES + 777],
    ]) {
      expect(sealIn(cuts).equals(whole)).toBe(true);
    }
  });

  const plain = randomBytes(3 * CHUNK_BYTES + 100);
  const frame = CHUNK_BYTES + STREAM_ABYTES;
  const sealedPromise = encrypt(key, plain);

  it('fails on a flipped byte anywhere (header, middle chunk, final chunk)', async () => {
    const sealed = await sealedPromise;
    for (const offset of [3, STREAM_HEADER_BYTES + 10, STREAM_HEADER_BYTES + frame + 500, sealed.length - 1]) {
      const tampered = Buffer.from(sealed);
      tampered[offset]! ^= 0x01;
      await expect(decrypt(key, tampered), `offset ${offset}`).rejects.toBeInstanceOf(IntegrityError);
    }
  });

  it('fails on truncation: the final chunk dropped, a partial chunk, a lone header, nothing', async () => {
    const sealed = await sealedPromise;
    const cuts = [STREAM_HEADER_BYTES + 3 * frame, sealed.length - 1, STREAM_HEADER_BYTES + frame + 5, STREAM_HEADER_BYTES, 10, 0];
    for (const cut of cuts) {
      await expect(decrypt(key, sealed.subarray(0, cut)), `cut at ${cut}`).rejects.toThrow(IntegrityError);
    }
    await expect(decrypt(key, sealed.subarray(0, STREAM_HEADER_BYTES + 3 * frame))).rejects.toThrow(/final chunk missing/);
  });

  it('fails on reordered chunks, appended data and the wrong key', async () => {
    const sealed = await sealedPromise;
    const header = sealed.subarray(0, STREAM_HEADER_BYTES);
    const c0 = sealed.subarray(STREAM_HEADER_BYTES, STREAM_HEADER_BYTES + frame);
    const c1 = sealed.subarray(STREAM_HEADER_BYTES + frame, STREAM_HEADER_BYTES + 2 * frame);
    const rest = sealed.subarray(STREAM_HEADER_BYTES + 2 * frame);
    await expect(decrypt(key, Buffer.concat([header, c1, c0, rest]))).rejects.toBeInstanceOf(IntegrityError);
    await expect(decrypt(key, Buffer.concat([sealed, Buffer.from('more')]))).rejects.toBeInstanceOf(IntegrityError);
    const fullFinal = await encrypt(key, randomBytes(2 * CHUNK_BYTES)); // the final chunk is a whole frame
    await expect(decrypt(key, Buffer.concat([fullFinal, Buffer.from('more')]))).rejects.toThrow(/after its final chunk/);
    await expect(decrypt(newKey(), sealed)).rejects.toBeInstanceOf(IntegrityError);
  });
});

describe('vault', () => {
  it('a rewrap under a new passphrase keeps the master key; the old passphrase stops working', async () => {
    const masterKey = newKey();
    const small = { salt: randomBytes(16), opslimit: 1, memlimit: 8192 };
    const first = await wrapMasterKey(masterKey, 'old', small);
    const second = await wrapMasterKey(masterKey, 'new', { ...small, salt: randomBytes(16) });
    expect((await unwrapMasterKey(second, 'new')).equals(masterKey)).toBe(true);
    await expect(unwrapMasterKey(second, 'old')).rejects.toThrow(/wrong passphrase/);
    expect((await unwrapMasterKey(first, 'old')).equals(masterKey)).toBe(true);
  });

  it('refuses hostile KDF parameters and malformed fields before spending CPU on them', async () => {
    const vault = await wrapMasterKey(newKey(), 'p', { salt: randomBytes(16), opslimit: 1, memlimit: 8192 });
    await expect(unwrapMasterKey({ ...vault, kdf: { ...vault.kdf, memlimit: 2 ** 40 } }, 'p')).rejects.toThrow(/memlimit/);
    await expect(unwrapMasterKey({ ...vault, kdf: { ...vault.kdf, opslimit: 1e6 } }, 'p')).rejects.toThrow(/opslimit/);
    await expect(unwrapMasterKey({ ...vault, kdf: { ...vault.kdf, salt: 'AAAA' } }, 'p')).rejects.toThrow(/salt/);
    await expect(unwrapMasterKey({ ...vault, cryptoVersion: 'v2' }, 'p')).rejects.toThrow(/crypto version/);
    await expect(unwrapMasterKey({ ...vault, wrappedMasterKey: 'not base64!' }, 'p')).rejects.toBeInstanceOf(IntegrityError);
  });
});
