/**
 * Crypto envelope v1 (docs/crypto.md) in the browser: the one envelope of src/client/envelope-core.ts on libsodium
 * compiled to WebAssembly, with the SDK's web primitives (src/client/web/primitives.ts: one copy for the console
 * and the SDK's browser entry).
 *
 * Environment-neutral (no DOM, no Node API): the page's worker, the page's self-test and a Node test all use it.
 */
import sodium from 'libsodium-wrappers-sumo';
import { SecretStreamReader as CoreSecretStreamReader, createEnvelope } from '../../../src/client/envelope-core.js';
import { ready, webPrimitives } from '../../../src/client/web/primitives.js';

export {
  AD,
  type BackupMetadata,
  DEFAULT_KDF_PROFILE,
  type KeyUse,
  keyUse,
  CHUNK_BYTES,
  CRYPTO_VERSION,
  IntegrityError,
  KDF_ACCEPTED_MAX,
  WrongPassphraseError,
  createEnvelope,
  requireRequestedBackup,
} from '../../../src/client/envelope-core.js';
export type { Primitives } from '../../../src/client/envelope-primitives.js';
export type { OpenedDek } from '../../../src/client/envelope-dek.js';
export type { KdfParams, VaultFields } from '../../../src/client/envelope-vault.js';
/** The provider-generic reader, for the self-test's runs on other primitives (one import path keeps one chunk). */
export { CoreSecretStreamReader };

export { ready, webPrimitives };

export const {
  wipe,
  fromBase64,
  deriveKek,
  newKdfParams,
  wrapMasterKey,
  unwrapMasterKey,
  keyMaterialOf,
  masterKeys,
  wrapDek,
  unwrapDek,
  openDek,
  keyFingerprints,
  deriveRecipient,
  parseRecipient,
  sealDek,
  sealMetadataJson,
  openMetadata,
} = createEnvelope(webPrimitives);

/** The archive secretstream reader (src/client/envelope-core.ts) on libsodium.js. */
export class SecretStreamReader extends CoreSecretStreamReader<Uint8Array> {
  constructor(key: Uint8Array) {
    super(webPrimitives, key);
  }
}

export const toHex = (bytes: Uint8Array): string => sodium.to_hex(bytes);
export const fromHex = (hex: string): Uint8Array => sodium.from_hex(hex);

/** Streaming SHA-256 (libsodium), for the plaintext check against the sealed metadata. */
export class Sha256 {
  private readonly state = sodium.crypto_hash_sha256_init();
  update(bytes: Uint8Array): void {
    sodium.crypto_hash_sha256_update(this.state, bytes);
  }
  hex(): string {
    return sodium.to_hex(sodium.crypto_hash_sha256_final(this.state));
  }
}

/** Restore attestations (docs/crypto.md#restore-attestations): verify each one after unlock with the ring's keys. */
export {
  type AttestationBody,
  type AttestationPayloadBody,
  type AttestationVerdict,
  type DrillOutcome,
  attestationMac,
  deriveAttestationKey,
  signAttestation,
  vaultKeyOf,
  verifyAttestation,
} from '../../../src/client/attestation.js';
