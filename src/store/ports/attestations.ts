/** Restore attestations (docs/api-rules.md#attestations): what drills reported, kept per backup, read per account. */
import type { RestoreAttestation } from '../../domain/attestations.js';

export interface AttestationStore {
  /**
   * Stores `attestation`, then drops the oldest of its backup's beyond the newest `keepPerBackup` (one transaction).
   */
  recordAttestation(attestation: RestoreAttestation, keepPerBackup: number): Promise<void>;
  /** The backup's attestations, newest first (by recordedAt, then id), at most `limit`. */
  listBackupAttestations(backupId: string, limit: number): Promise<RestoreAttestation[]>;
  /**
   * The attestations of the READY, unexpired (at `now`) backups of these accounts, newest first, at most `limit`:
   * those of hidden, deleted or expired backups are not listed.
   */
  listAccountAttestations(accountIds: readonly string[], now: number, limit: number): Promise<RestoreAttestation[]>;
}
