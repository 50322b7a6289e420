/** A backup's metadata (docs/crypto.md §3): coffer-archive/v1 JSON sealed under the backup's DEK. */
import { AD, ARCHIVE_FORMATS, type BackupMetadata, CHUNK_BYTES, COMPRESSIONS, IntegrityError, isPlainName } from './envelope-format.js';
import { decodeBase64, open, type Primitives, seal, utf8 } from './envelope-primitives.js';

export interface SealedMetadata {
  encryptedMetadata: string;
  encryptedMetadataNonce: string;
}

function parseMetadata(plain: Uint8Array): BackupMetadata {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(plain));
  } catch {
    throw new IntegrityError('the backup metadata is not JSON');
  }
  const m = parsed as Partial<BackupMetadata> | null;
  const ok =
    typeof m === 'object' &&
    m !== null &&
    m.format === 'coffer-archive/v1' &&
    (ARCHIVE_FORMATS as unknown[]).includes(m.archive) &&
    (COMPRESSIONS as unknown[]).includes(m.compression) &&
    (m.archive !== 'raw' || isPlainName(m.name)) &&
    m.chunkBytes === CHUNK_BYTES &&
    typeof m.plaintextSha256 === 'string' &&
    /^[0-9a-f]{64}$/.test(m.plaintextSha256) &&
    Number.isSafeInteger(m.plaintextSizeBytes) &&
    Number.isSafeInteger(m.ciphertextSizeBytes);
  if (!ok) throw new IntegrityError('the backup metadata is not coffer-archive/v1 metadata');
  return m as BackupMetadata;
}

/** The metadata's operations: sealing it (as an object or as exact JSON text), opening and checking it. */
export function metadataOperations<B extends Uint8Array>(p: Primitives<B>) {
  /** Seals metadata given as its exact JSON text (the test vectors fix the bytes). */
  function sealMetadataJson(dek: Uint8Array, backupId: string, json: string, nonce?: Uint8Array): SealedMetadata {
    const box = seal(p, dek, utf8.encode(json), AD.metadata(backupId), nonce);
    return { encryptedMetadata: p.toBase64(box.ciphertext), encryptedMetadataNonce: p.toBase64(box.nonce) };
  }

  const sealMetadata = (dek: Uint8Array, backupId: string, metadata: BackupMetadata, nonce?: Uint8Array): SealedMetadata =>
    sealMetadataJson(dek, backupId, JSON.stringify(metadata), nonce);

  function openMetadata(
    dek: Uint8Array,
    backupId: string,
    fields: { encryptedMetadata: string | null; encryptedMetadataNonce: string | null },
  ): BackupMetadata {
    const sealed = decodeBase64(p, fields.encryptedMetadata, 'encryptedMetadata');
    const nonce = decodeBase64(p, fields.encryptedMetadataNonce, 'encryptedMetadataNonce');
    return parseMetadata(open(p, dek, sealed, nonce, AD.metadata(backupId), 'the backup metadata was altered'));
  }

  return { sealMetadata, sealMetadataJson, openMetadata };
}
