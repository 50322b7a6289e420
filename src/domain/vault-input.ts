/**
 * What a client hands the services to store, in the domain's own terms (the routes map the wire bodies of
 * src/contract/ to these): a vault envelope to bootstrap or rotate with, and what seals a backup at finalize.
 */
import type { Vault } from './entities.js';

/** The vault material a client sends (POST /api/backup-account/bootstrap and /rotate): the Vault without its times. */
export type VaultEnvelope = Omit<Vault, 'updatedAt' | 'createdAt'>;

/** What completes an uploaded backup (POST /api/backups/{id}/finalize): its sealed keys and metadata and its sizes. */
export interface FinalizeInput {
  wrappedDek: string;
  wrappedDekNonce: string;
  encryptedMetadata: string;
  encryptedMetadataNonce: string;
  /** What the client says it uploaded: must be what was stored. */
  ciphertextSizeBytes: number;
  plaintextSizeBytes: number;
  clientVersion: string | null;
  hostappVersion: string | null;
}
