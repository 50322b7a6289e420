/** Restore attestations (docs/api-rules.md#attestations): what drills reported, kept per backup, read per account. */
import type { AttestationResult, RestoreAttestation } from '../../domain/attestations.js';

/** An account's newest attestation (the operator's "last drill"). */
export interface LatestAttestation {
  accountId: string;
  recordedAt: number;
  result: AttestationResult;
}

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
  /** Each account's newest attestation, whatever its backup's state (accounts without one are absent). */
  latestAttestations(): Promise<LatestAttestation[]>;
}
