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
import sodium from 'sodium-native';
import { describe, expect, it } from 'vitest';
import {
  AEAD_ABYTES,
  CHUNK_BYTES,
  DecryptStream,
  EncryptStream,
  IntegrityError,
  KDF_PROFILES,
  NONCE_BYTES,
  SALT_BYTES,
  STREAM_ABYTES,
  STREAM_HEADER_BYTES,
  ciphertextSize,
  deriveKek,
  newKey,
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
import { ROOT } from './helpers.js';

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
  it.skipIf(python.status !== 0)('match an independent libsodium build (system libsodium through Python ctypes)', () => {
    const run = spawnSync('python3', [path.join(ROOT, 'test/client/vectors_libsodium.py'), DOC], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('ok');
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
