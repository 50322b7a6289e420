/**
 * The published test vectors of docs/crypto.md, checked against the envelope (src/client/envelope-core.ts) on a
 * provider's primitives, by default this page's libsodium.js. The console's "Browser check" page runs them in the
 * browser; test/console/envelope-web.test.ts runs them in Node on both providers.
 */
import {
  CoreSecretStreamReader as SecretStreamReader,
  Sha256,
  createEnvelope,
  fromHex,
  toHex,
  webPrimitives,
  type Primitives,
} from './envelope.js';

export interface Vectors {
  passphrase: string;
  kdf: { salt: string; opslimit: number; memlimit: number };
  kek: string;
  masterKey: string;
  wrappedMasterKeyNonce: string;
  vault: {
    cryptoVersion: string;
    kdf: { salt: string; opslimit: number; memlimit: number };
    wrappedMasterKey: string;
    wrappedMasterKeyNonce: string;
  };
  backupId: string;
  dek: string;
  wrappedDekNonce: string;
  encryptedMetadataNonce: string;
  metadataJson: string;
  finalize: { wrappedDek: string; wrappedDekNonce: string; encryptedMetadata: string; encryptedMetadataNonce: string };
  recipient: { seed: string; publicKey: string; fingerprint: string; text: string };
  sealedDek: { eseed: string; sharedSecret: string; xwingCiphertext: string; ad: string; wrappedDek: string; wrappedDekNonce: string };
  keyring: {
    keys: string[];
    plaintext: string;
    wrappedMasterKeyNonce: string;
    vault: Vectors['vault'];
    finalize: { wrappedDek: string; wrappedDekNonce: string };
    recipientFingerprint: string;
  };
  archive: { ciphertext: string; plaintextSizeBytes: number; plaintextSha256: string; files: Record<string, string> };
}

/** The JSON block after the `<!-- test-vectors -->` marker of docs/crypto.md. */
export function parseVectors(markdown: string): Vectors {
  const match = /<!-- test-vectors[^>]*-->\s*```json\n([\s\S]*?)\n```/.exec(markdown);
  if (!match) throw new Error('docs/crypto.md has no test-vectors block');
  return JSON.parse(match[1]!) as Vectors;
}

/** Regular files of a tar archive (ustar), name → bytes. */
export function tarFiles(tar: Uint8Array): Record<string, Uint8Array> {
  const text = new TextDecoder();
  const files: Record<string, Uint8Array> = {};
  for (let at = 0; at + 512 <= tar.length;) {
    const header = tar.subarray(at, at + 512);
    if (header.every((byte) => byte === 0)) break;
    const field = (from: number, to: number) => text.decode(header.subarray(from, to)).replace(/\0.*$/s, '');
    const size = parseInt(field(124, 136).trim() || '0', 8);
    const type = field(156, 157);
    const prefix = field(345, 500);
    const name = (prefix ? `${prefix}/` : '') + field(0, 100);
    if (type === '0' || type === '') files[name.replace(/^\.\//, '')] = tar.slice(at + 512, at + 512 + size);
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return files;
}

const ignore = () => {};

export interface Check {
  name: string;
  ok: boolean;
  detail?: string;
}

/** Runs every vector; `gunzip` is the environment's (DecompressionStream in the browser, zlib in Node). */
export async function runVectorChecks(
  v: Vectors,
  gunzip: (bytes: Uint8Array) => Promise<Uint8Array>,
  primitives: Primitives = webPrimitives,
): Promise<Check[]> {
  const {
    deriveKek,
    deriveRecipient,
    fromBase64,
    openMetadata,
    parseRecipient,
    sealDek,
    sealMetadataJson,
    unwrapDek,
    unwrapMasterKey,
    wrapDek,
    wrapMasterKey,
  } = createEnvelope(primitives);
  const checks: Check[] = [];
  const check = async (name: string, run: () => boolean | Promise<boolean>) => {
    try {
      checks.push({ name, ok: await run() });
    } catch (error) {
      checks.push({ name, ok: false, detail: (error as Error).message });
    }
  };
  const kdf = { salt: fromBase64(v.kdf.salt, 'kdf.salt'), opslimit: v.kdf.opslimit, memlimit: v.kdf.memlimit };
  const masterKey = fromHex(v.masterKey);
  const dek = fromHex(v.dek);

  await check('Argon2id13 KEK from the NFC-normalized passphrase', async () => toHex(await deriveKek(v.passphrase, kdf)) === v.kek);
  await check('master key wrapping (XChaCha20-Poly1305, AD coffer/v1/master)', async () => {
    const vault = await wrapMasterKey(masterKey, v.passphrase, kdf, fromHex(v.wrappedMasterKeyNonce));
    return JSON.stringify(vault) === JSON.stringify(v.vault);
  });
  await check('master key unwrapping with the passphrase', async () => toHex(await unwrapMasterKey(v.vault, v.passphrase)) === v.masterKey);
  await check('a wrong passphrase is refused', async () => {
    try {
      await unwrapMasterKey(v.vault, `${v.passphrase}!`);
      return false;
    } catch (error) {
      return (error as Error).name === 'WrongPassphraseError';
    }
  });
  await check('data key wrapping bound to the backup id', () => {
    const wrapped = wrapDek(masterKey, v.backupId, dek, fromHex(v.wrappedDekNonce));
    return wrapped.wrappedDek === v.finalize.wrappedDek && toHex(unwrapDek(masterKey, v.backupId, v.finalize)) === v.dek;
  });
  await check('recipient from the master key (BLAKE2b KDF, X-Wing, Bech32m, SHA-256 fingerprint)', () => {
    const recipient = deriveRecipient(masterKey);
    const parsed = parseRecipient(v.recipient.text);
    return (
      toHex(recipient.publicKey) === v.recipient.publicKey &&
      recipient.text === v.recipient.text &&
      recipient.fingerprint === v.recipient.fingerprint &&
      toHex(parsed.publicKey) === v.recipient.publicKey
    );
  });
  await check('data key sealed to the recipient (X-Wing, XChaCha20-Poly1305) and unsealed with the master key', () => {
    const sealed = sealDek(
      parseRecipient(v.recipient.text),
      v.backupId,
      dek,
      fromBase64(v.sealedDek.wrappedDekNonce, 'nonce'),
      fromHex(v.sealedDek.eseed),
    );
    return sealed.wrappedDek === v.sealedDek.wrappedDek && toHex(unwrapDek(masterKey, v.backupId, v.sealedDek)) === v.dek;
  });
  await check('keyring after a rekey: unwrapped with the passphrase, every older data key opened with it', async () => {
    const ring = await unwrapMasterKey(v.keyring.vault, v.passphrase);
    const vault = await wrapMasterKey(fromHex(v.keyring.plaintext), v.passphrase, kdf, fromHex(v.keyring.wrappedMasterKeyNonce));
    return (
      toHex(ring) === v.keyring.plaintext &&
      JSON.stringify(vault) === JSON.stringify(v.keyring.vault) &&
      [v.keyring.finalize, v.finalize, v.sealedDek].every((form) => toHex(unwrapDek(ring, v.backupId, form)) === v.dek) &&
      deriveRecipient(ring).fingerprint === v.keyring.recipientFingerprint
    );
  });
  await check('metadata sealing and opening', () => {
    const sealed = sealMetadataJson(dek, v.backupId, v.metadataJson, fromHex(v.encryptedMetadataNonce));
    const opened = openMetadata(dek, v.backupId, v.finalize);
    return sealed.encryptedMetadata === v.finalize.encryptedMetadata && opened.plaintextSha256 === v.archive.plaintextSha256;
  });
  await check('archive: secretstream decryption, gunzip, SHA-256 and contents', async () => {
    const sealed = fromBase64(v.archive.ciphertext, 'archive.ciphertext');
    // Fed in uneven pieces, as a network download arrives.
    const reader = new SecretStreamReader(primitives, dek);
    const parts: Uint8Array[] = [];
    const keep = (part: Uint8Array) => parts.push(part);
    for (let at = 0; at < sealed.length; at += 7) reader.push(sealed.subarray(at, at + 7), keep);
    reader.finish(keep);
    const compressed = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0));
    let offset = 0;
    for (const part of parts) {
      compressed.set(part, offset);
      offset += part.length;
    }
    const tar = await gunzip(compressed);
    const hash = new Sha256();
    hash.update(tar);
    const files = tarFiles(tar);
    const text = new TextDecoder();
    const contentsMatch = Object.entries(v.archive.files).every(([name, content]) => files[name] && text.decode(files[name]) === content);
    return tar.length === v.archive.plaintextSizeBytes && hash.hex() === v.archive.plaintextSha256 && contentsMatch;
  });
  await check('a flipped archive byte is refused', () => {
    const sealed = fromBase64(v.archive.ciphertext, 'archive.ciphertext').slice();
    sealed[40] = sealed[40]! ^ 1;
    try {
      const reader = new SecretStreamReader(primitives, dek);
      reader.push(sealed, ignore);
      reader.finish(ignore);
      return false;
    } catch (error) {
      return (error as Error).name === 'IntegrityError';
    }
  });
  await check('a truncated archive is refused', () => {
    const sealed = fromBase64(v.archive.ciphertext, 'archive.ciphertext');
    try {
      const reader = new SecretStreamReader(primitives, dek);
      reader.push(sealed.subarray(0, sealed.length - 1), ignore);
      reader.finish(ignore);
      return false;
    } catch (error) {
      return (error as Error).name === 'IntegrityError';
    }
  });
  return checks;
}
