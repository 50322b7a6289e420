/**
 * The one envelope v1 (src/client/envelope-core.ts) on its two primitive providers: the docs/crypto.md test vectors
 * (the very checks the console's "Browser check" runs) on sodium-native and on libsodium-wrappers-sumo (libsodium in
 * WebAssembly, console/src/crypto), and interoperability between the CLI and the console in both directions, at
 * chunk boundaries and with a wrong passphrase.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import zlib from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import * as native from '../../src/client/envelope.js';
import * as web from '../../console/src/crypto/envelope.js';
import { parseVectors, runVectorChecks } from '../../console/src/crypto/selftest.js';
import { ROOT } from '../client/helpers.js';

const ignore = () => {};
const gunzip = async (bytes: Uint8Array) => new Uint8Array(zlib.gunzipSync(bytes));

beforeAll(async () => {
  await web.ready;
});

describe('console envelope v1 (libsodium WebAssembly)', () => {
  it.each([
    ['libsodium.js (the console)', web.webPrimitives],
    ['sodium-native (the CLI)', native.nodePrimitives],
  ])('passes every docs/crypto.md test vector check the browser page runs, on %s', async (_name, primitives) => {
    const vectors = parseVectors(fs.readFileSync(path.join(ROOT, 'docs/crypto.md'), 'utf8'));
    const checks = await runVectorChecks(vectors, gunzip, primitives);
    expect(checks.length).toBe(17);
    expect(checks.filter((check) => !check.ok)).toEqual([]);
  });

  it('unlocks a vault, a data key and metadata made by the CLI, and refuses a wrong passphrase', async () => {
    const masterKey = native.newKey();
    const vault = await native.wrapMasterKey(masterKey, 'pässphrase', native.newKdfParams('min'));
    const unwrapped = await web.unwrapMasterKey(vault, 'pässphrase');
    expect(Buffer.from(unwrapped).equals(masterKey)).toBe(true);
    await expect(web.unwrapMasterKey(vault, 'passphrase')).rejects.toThrow(web.WrongPassphraseError);
    await expect(web.unwrapMasterKey({ ...vault, kdf: { ...vault.kdf, opslimit: 65 } }, 'pässphrase')).rejects.toThrow(
      /outside the accepted range/,
    );

    const backupId = '01a20000-0000-7000-8000-0000000000aa';
    const dek = native.newKey();
    const wrapped = native.wrapDek(masterKey, backupId, dek);
    expect(Buffer.from(web.unwrapDek(unwrapped, backupId, wrapped)).equals(dek)).toBe(true);
    expect(() => web.unwrapDek(unwrapped, '01a20000-0000-7000-8000-0000000000bb', wrapped)).toThrow(web.IntegrityError);
    const metadata: native.BackupMetadata = {
      format: 'coffer-archive/v1',
      name: 'docs',
      sourcePath: '/home/alice/docs',
      createdAt: '2026-11-21T10:00:00.000Z',
      kind: 'directory',
      fileCount: 3,
      directoryCount: 1,
      symlinkCount: 0,
      archive: 'tar',
      compression: 'gzip',
      chunkBytes: native.CHUNK_BYTES,
      plaintextSizeBytes: 10,
      plaintextSha256: 'a'.repeat(64),
      ciphertextSizeBytes: 99,
    };
    expect(web.openMetadata(dek, backupId, native.sealMetadata(dek, backupId, metadata))).toEqual(metadata);
  });

  it('unseals a data key the CLI sealed to the vault recipient (the console restore needs no other path), and the reverse', async () => {
    const masterKey = native.newKey();
    const backupId = '01a20000-0000-7000-8000-0000000000ee';
    const recipient = web.deriveRecipient(masterKey);
    expect(native.deriveRecipient(masterKey)).toEqual({ ...recipient, publicKey: expect.anything() });
    expect(Buffer.from(native.deriveRecipient(masterKey).publicKey).equals(recipient.publicKey)).toBe(true);
    const dek = native.newKey();
    const sealedByCli = native.sealDek(native.parseRecipient(recipient.text), backupId, dek);
    expect(Buffer.from(web.unwrapDek(masterKey, backupId, sealedByCli)).equals(dek)).toBe(true);
    const sealedByPage = web.sealDek(web.parseRecipient(recipient.text), backupId, dek);
    expect(native.unwrapDek(masterKey, backupId, sealedByPage).equals(dek)).toBe(true);
    expect(() => web.unwrapDek(native.newKey(), backupId, sealedByCli)).toThrow(/sealed to another recipient/);
  });

  it('decrypts the CLI secretstream at every chunk boundary, fed in network-sized pieces; the CLI reads its own', async () => {
    const key = native.newKey();
    for (const size of [0, 1, native.CHUNK_BYTES - 1, native.CHUNK_BYTES, native.CHUNK_BYTES + 1, 3 * native.CHUNK_BYTES + 777]) {
      const plain = native.randomBytes(size);
      const sealed = await buffer(Readable.from(size ? [plain] : []).pipe(new native.EncryptStream(key)));
      expect(sealed.length).toBe(native.ciphertextSize(size));
      for (const piece of [1000, 16_384, sealed.length || 1]) {
        const reader = new web.SecretStreamReader(new Uint8Array(key));
        const out: Uint8Array[] = [];
        const keep = (plain: Uint8Array) => out.push(plain);
        for (let at = 0; at < sealed.length; at += piece) reader.push(sealed.subarray(at, at + piece), keep);
        reader.finish(keep);
        expect(Buffer.concat(out).equals(plain), `${size} bytes in pieces of ${piece}`).toBe(true);
      }
      // Truncated by one frame boundary byte, or one byte flipped: refused.
      if (sealed.length > 30) {
        const truncated = new web.SecretStreamReader(new Uint8Array(key));
        expect(() => {
          truncated.push(sealed.subarray(0, sealed.length - 1), ignore);
          truncated.finish(ignore);
        }).toThrow(web.IntegrityError);
        const flipped = Buffer.from(sealed);
        flipped[flipped.length - 5] = flipped[flipped.length - 5]! ^ 0x10;
        const tampered = new web.SecretStreamReader(new Uint8Array(key));
        expect(() => {
          tampered.push(flipped, ignore);
          tampered.finish(ignore);
        }).toThrow(web.IntegrityError);
      }
    }
  });

  it('hashes like node:crypto (the streaming SHA-256 the restore checks against the sealed metadata)', () => {
    const data = native.randomBytes(200_000);
    const hash = new web.Sha256();
    hash.update(data.subarray(0, 1234));
    hash.update(data.subarray(1234));
    expect(hash.hex()).toBe(createHash('sha256').update(data).digest('hex'));
  });
});
