/**
 * The published test vectors of docs/crypto.md, checked against the envelope (src/client/envelope-core.ts) on a
 * provider's primitives, by default this page's libsodium.js. The console's "Browser check" page runs them in the
 * browser; test/console/envelope-web.test.ts runs them in Node on both providers.
 */
import {
  CoreSecretStreamReader as SecretStreamReader,
  Sha256,
  attestationMac,
  createEnvelope,
  deriveAttestationKey,
  fromHex,
  toHex,
  vaultKeyOf,
  verifyAttestation,
  webPrimitives,
  type AttestationBody,
  type AttestationVerdict,
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
  /** §7's block (`<!-- attestation-vectors -->`): restore attestations. */
  attestation: AttestationVectors;
}

export interface AttestationVectors {
  keys: { masterKey: string; attestationKey: string; vaultKey: string }[];
  attestations: {
    name: string;
    ring: string[];
    signedBy?: number;
    payloadText: string;
    macHex: string;
    shown: AttestationBody;
    verdict: AttestationVerdict['status'];
  }[];
}

/** The JSON block after a `<!-- marker -->` of docs/crypto.md. */
function jsonBlock(markdown: string, marker: string): unknown {
  const match = new RegExp(`<!-- ${marker}[^>]*-->\\s*\`\`\`json\\n([\\s\\S]*?)\\n\`\`\``).exec(markdown);
  if (!match) throw new Error(`docs/crypto.md has no ${marker} block`);
  return JSON.parse(match[1]!);
}

/** The test vectors of docs/crypto.md: the envelope's (`<!-- test-vectors -->`) and the attestations' (§7). */
export function parseVectors(markdown: string): Vectors {
  return {
    ...(jsonBlock(markdown, 'test-vectors') as Vectors),
    attestation: jsonBlock(markdown, 'attestation-vectors') as AttestationVectors,
  };
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

type Envelope = ReturnType<typeof createEnvelope>;

/** A check's name and its test: true when the envelope gives what the vectors say. */
type VectorCheck = [name: string, run: () => boolean | Promise<boolean>];

/** What every check starts from: the vectors, the envelope on the provider, and the keys the vectors hold. */
interface Inputs {
  v: Vectors;
  env: Envelope;
  primitives: Primitives;
  gunzip: (bytes: Uint8Array) => Promise<Uint8Array>;
  kdf: { salt: Uint8Array; opslimit: number; memlimit: number };
  masterKey: Uint8Array;
  dek: Uint8Array;
}

/** The vault: the KEK from the passphrase, and the master key wrapped and unwrapped with it. */
function vaultChecks({ v, env, kdf, masterKey }: Inputs): VectorCheck[] {
  const { deriveKek, unwrapMasterKey, wrapMasterKey } = env;
  return [
    ['Argon2id13 KEK from the NFC-normalized passphrase', async () => toHex(await deriveKek(v.passphrase, kdf)) === v.kek],
    [
      'master key wrapping (XChaCha20-Poly1305, AD coffer/v1/master)',
      async () => {
        const vault = await wrapMasterKey(masterKey, v.passphrase, kdf, fromHex(v.wrappedMasterKeyNonce));
        return JSON.stringify(vault) === JSON.stringify(v.vault);
      },
    ],
    ['master key unwrapping with the passphrase', async () => toHex(await unwrapMasterKey(v.vault, v.passphrase)) === v.masterKey],
    [
      'a wrong passphrase is refused',
      async () => {
        try {
          await unwrapMasterKey(v.vault, `${v.passphrase}!`);
          return false;
        } catch (error) {
          return (error as Error).name === 'WrongPassphraseError';
        }
      },
    ],
  ];
}

/** The data key: wrapped with the master key, sealed to the recipient, opened by a keyring after a rekey. */
function keyChecks({ v, env, kdf, masterKey, dek }: Inputs): VectorCheck[] {
  const { deriveRecipient, fromBase64, parseRecipient, sealDek, unwrapDek, unwrapMasterKey, wrapDek, wrapMasterKey } = env;
  return [
    [
      'data key wrapping bound to the backup id',
      () => {
        const wrapped = wrapDek(masterKey, v.backupId, dek, fromHex(v.wrappedDekNonce));
        return wrapped.wrappedDek === v.finalize.wrappedDek && toHex(unwrapDek(masterKey, v.backupId, v.finalize)) === v.dek;
      },
    ],
    [
      'recipient from the master key (BLAKE2b KDF, X-Wing, Bech32m, SHA-256 fingerprint)',
      () => {
        const recipient = deriveRecipient(masterKey);
        const parsed = parseRecipient(v.recipient.text);
        return (
          toHex(recipient.publicKey) === v.recipient.publicKey &&
          recipient.text === v.recipient.text &&
          recipient.fingerprint === v.recipient.fingerprint &&
          toHex(parsed.publicKey) === v.recipient.publicKey
        );
      },
    ],
    [
      'data key sealed to the recipient (X-Wing, XChaCha20-Poly1305) and unsealed with the master key',
      () => {
        const nonce = fromBase64(v.sealedDek.wrappedDekNonce, 'nonce');
        const sealed = sealDek(parseRecipient(v.recipient.text), v.backupId, dek, nonce, fromHex(v.sealedDek.eseed));
        return sealed.wrappedDek === v.sealedDek.wrappedDek && toHex(unwrapDek(masterKey, v.backupId, v.sealedDek)) === v.dek;
      },
    ],
    [
      'keyring after a rekey: unwrapped with the passphrase, every older data key opened with it',
      async () => {
        const ring = await unwrapMasterKey(v.keyring.vault, v.passphrase);
        const vault = await wrapMasterKey(fromHex(v.keyring.plaintext), v.passphrase, kdf, fromHex(v.keyring.wrappedMasterKeyNonce));
        return (
          toHex(ring) === v.keyring.plaintext &&
          JSON.stringify(vault) === JSON.stringify(v.keyring.vault) &&
          [v.keyring.finalize, v.finalize, v.sealedDek].every((form) => toHex(unwrapDek(ring, v.backupId, form)) === v.dek) &&
          deriveRecipient(ring).fingerprint === v.keyring.recipientFingerprint
        );
      },
    ],
  ];
}

/** The archive decrypted with the data key, fed in uneven pieces as a network download arrives. */
function decryptInPieces({ v, env, primitives, dek }: Inputs): Uint8Array {
  const sealed = env.fromBase64(v.archive.ciphertext, 'archive.ciphertext');
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
  return compressed;
}

/** Whether reading `sealed` to its end is refused as tampering. */
function refused({ primitives, dek }: Inputs, sealed: Uint8Array): boolean {
  try {
    const reader = new SecretStreamReader(primitives, dek);
    reader.push(sealed, ignore);
    reader.finish(ignore);
    return false;
  } catch (error) {
    return (error as Error).name === 'IntegrityError';
  }
}

/** The sealed metadata and the archive: opened, decrypted, verified; a flipped or missing byte refused. */
function archiveChecks(inputs: Inputs): VectorCheck[] {
  const { v, env, dek, gunzip } = inputs;
  const ciphertext = () => env.fromBase64(v.archive.ciphertext, 'archive.ciphertext');
  return [
    [
      'metadata sealing and opening',
      () => {
        const sealed = env.sealMetadataJson(dek, v.backupId, v.metadataJson, fromHex(v.encryptedMetadataNonce));
        const opened = env.openMetadata(dek, v.backupId, v.finalize);
        return sealed.encryptedMetadata === v.finalize.encryptedMetadata && opened.plaintextSha256 === v.archive.plaintextSha256;
      },
    ],
    [
      'archive: secretstream decryption, gunzip, SHA-256 and contents',
      async () => {
        const tar = await gunzip(decryptInPieces(inputs));
        const hash = new Sha256();
        hash.update(tar);
        const files = tarFiles(tar);
        const text = new TextDecoder();
        const contentsMatch = Object.entries(v.archive.files).every(
          ([name, content]) => files[name] && text.decode(files[name]) === content,
        );
        return tar.length === v.archive.plaintextSizeBytes && hash.hex() === v.archive.plaintextSha256 && contentsMatch;
      },
    ],
    [
      'a flipped archive byte is refused',
      () => {
        const sealed = ciphertext().slice();
        sealed[40] = sealed[40]! ^ 1;
        return refused(inputs, sealed);
      },
    ],
    [
      'a truncated archive is refused',
      () => {
        const sealed = ciphertext();
        return refused(inputs, sealed.subarray(0, sealed.length - 1));
      },
    ],
  ];
}

/** Restore attestations (§7): each key's attestation key and vault key, each mac, and each verdict read with its ring. */
function attestationChecks({ v, primitives }: Inputs): VectorCheck[] {
  const { keys, attestations } = v.attestation;
  const bytes = new TextEncoder();
  return [
    [
      'attestation keys from the master keys (crypto_kdf "cofferat", SHA-256 vault key)',
      () =>
        keys.every(({ masterKey, attestationKey, vaultKey }) => {
          const key = deriveAttestationKey(primitives, fromHex(masterKey));
          return toHex(key) === attestationKey && vaultKeyOf(primitives, key) === vaultKey;
        }),
    ],
    ...attestations.map((vector): VectorCheck => [
      `attestation: ${vector.name} (${vector.verdict})`,
      () => {
        const ring = vector.ring.map(fromHex);
        const signer = vector.signedBy === undefined ? null : deriveAttestationKey(primitives, ring[vector.signedBy]!);
        const macMatches = signer === null || toHex(attestationMac(signer, bytes.encode(vector.payloadText))) === vector.macHex;
        return macMatches && verifyAttestation(primitives, ring, vector.shown).status === vector.verdict;
      },
    ]),
  ];
}

/** Runs every vector; `gunzip` is the environment's (DecompressionStream in the browser, zlib in Node). */
export async function runVectorChecks(
  v: Vectors,
  gunzip: (bytes: Uint8Array) => Promise<Uint8Array>,
  primitives: Primitives = webPrimitives,
): Promise<Check[]> {
  const env = createEnvelope(primitives);
  const kdf = { salt: env.fromBase64(v.kdf.salt, 'kdf.salt'), opslimit: v.kdf.opslimit, memlimit: v.kdf.memlimit };
  const inputs: Inputs = { v, env, primitives, gunzip, kdf, masterKey: fromHex(v.masterKey), dek: fromHex(v.dek) };
  const checks: Check[] = [];
  for (const [name, run] of [...vaultChecks(inputs), ...keyChecks(inputs), ...archiveChecks(inputs), ...attestationChecks(inputs)]) {
    try {
      checks.push({ name, ok: await run() });
    } catch (error) {
      checks.push({ name, ok: false, detail: (error as Error).message });
    }
  }
  return checks;
}
