/**
 * Generates the test vectors of docs/crypto.md (run: npx vite-node test/client/vectors.gen.ts).
 * Everything is fixed except the secretstream header, which libsodium draws itself: the archive vector is
 * therefore a decryption vector. test/client/envelope.test.ts checks the published values.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import zlib from 'node:zlib';
import { ml_kem768_x25519 } from '@noble/post-quantum/hybrid.js';
import * as tar from 'tar';
import {
  EncryptStream,
  addMasterKey,
  deriveKek,
  deriveRecipient,
  nodePrimitives,
  sealDek,
  sealMetadata,
  wrapDek,
  wrapMasterKey,
  type BackupMetadata,
} from '../../src/client/envelope.js';
import { formatKit } from '../../src/client/kit.js';

const bytes = (length: number, start: number) => Buffer.from(Array.from({ length }, (_, i) => (start + i) & 0xff));

const passphrase = 'Coffer cafe\u0301 \u2615 correct horse';
const kdf = { salt: bytes(16, 0x00), opslimit: 2, memlimit: 67_108_864 };
const masterKey = bytes(32, 0x10);
const masterNonce = bytes(24, 0x40);
const backupId = '01a2008c-0000-7000-8000-000000000001';
const dek = bytes(32, 0x80);
const dekNonce = bytes(24, 0xa0);
const metadataNonce = bytes(24, 0xc0);
const sealedDekNonce = bytes(24, 0xe0);
const eseed = bytes(64, 0x20);
const newerKey = bytes(32, 0x60);
const keyringNonce = bytes(24, 0x50);
const keyringDekNonce = bytes(24, 0x90);

// A one-file tar (portable headers, fixed mtime), gzip'd, sealed with the DEK.
const entry = new tar.Header({
  path: 'hello.txt',
  mode: 0o644,
  size: 14,
  mtime: new Date('2026-01-01T00:00:00.000Z'),
  type: 'File',
  uid: 0,
  gid: 0,
});
const header = Buffer.alloc(512);
entry.encode(header, 0);
const content = Buffer.from('hello, coffer\n');
const tarBytes = Buffer.concat([header, content, Buffer.alloc(512 - content.length), Buffer.alloc(1024)]);
const gz = zlib.gzipSync(tarBytes, { level: 9 });
const ciphertext = await buffer(Readable.from([gz]).pipe(new EncryptStream(dek)));

const metadata: BackupMetadata = {
  format: 'coffer-archive/v1',
  name: 'hello',
  sourcePath: '/home/alice/hello',
  createdAt: '2026-01-01T00:00:00.000Z',
  kind: 'directory',
  fileCount: 1,
  directoryCount: 0,
  symlinkCount: 0,
  archive: 'tar',
  compression: 'gzip',
  chunkBytes: 65536,
  plaintextSizeBytes: tarBytes.length,
  plaintextSha256: createHash('sha256').update(tarBytes).digest('hex'),
  ciphertextSizeBytes: ciphertext.length,
};

const kek = await deriveKek(passphrase, kdf);
const recipientSeed = Buffer.alloc(32);
nodePrimitives.kdfDerive(recipientSeed, 1, 'cofferxw', masterKey);
const recipient = deriveRecipient(masterKey);
const sealed = sealDek(recipient, backupId, dek, sealedDekNonce, eseed);
const sealedBytes = Buffer.from(sealed.wrappedDek, 'base64');
const { sharedSecret } = ml_kem768_x25519.encapsulate(recipient.publicKey, eseed);
const vault = await wrapMasterKey(masterKey, passphrase, kdf, masterNonce);
// The keyring after one rekey: a fixed newer key in front of `masterKey` (addMasterKey draws it at random).
const ring = Buffer.from(addMasterKey(masterKey));
newerKey.copy(ring, 5);
const ringRecipient = deriveRecipient(ring);
const vectors = {
  passphrase,
  kdf: { salt: kdf.salt.toString('base64'), opslimit: kdf.opslimit, memlimit: kdf.memlimit },
  kek: Buffer.from(kek).toString('hex'),
  masterKey: masterKey.toString('hex'),
  wrappedMasterKeyNonce: masterNonce.toString('hex'),
  vault,
  backupId,
  dek: dek.toString('hex'),
  wrappedDekNonce: dekNonce.toString('hex'),
  encryptedMetadataNonce: metadataNonce.toString('hex'),
  metadataJson: JSON.stringify(metadata),
  finalize: {
    ...wrapDek(masterKey, backupId, dek, dekNonce),
    ...sealMetadata(dek, backupId, metadata, metadataNonce),
  },
  recipient: {
    seed: recipientSeed.toString('hex'),
    publicKey: Buffer.from(recipient.publicKey).toString('hex'),
    fingerprint: recipient.fingerprint,
    text: recipient.text,
  },
  sealedDek: {
    eseed: eseed.toString('hex'),
    sharedSecret: Buffer.from(sharedSecret).toString('hex'),
    xwingCiphertext: sealedBytes.subarray(12, 12 + 1120).toString('hex'),
    ad: `coffer/v1/sealed-dek/${backupId}/${recipient.fingerprint}`,
    wrappedDek: sealed.wrappedDek,
    wrappedDekNonce: sealed.wrappedDekNonce,
  },
  keyring: {
    keys: [newerKey.toString('hex'), masterKey.toString('hex')],
    plaintext: ring.toString('hex'),
    wrappedMasterKeyNonce: keyringNonce.toString('hex'),
    vault: await wrapMasterKey(ring, passphrase, kdf, keyringNonce),
    finalize: wrapDek(ring, backupId, dek, keyringDekNonce),
    recipientFingerprint: ringRecipient.fingerprint,
  },
  kit: { server: 'https://coffer.example', text: formatKit(ring, 'https://coffer.example') },
  archive: {
    ciphertext: ciphertext.toString('base64'),
    plaintextSizeBytes: tarBytes.length,
    plaintextSha256: metadata.plaintextSha256,
    files: { 'hello.txt': content.toString('utf8') },
  },
};
process.stdout.write(`${JSON.stringify(vectors, null, 2)}\n`);
