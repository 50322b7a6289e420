/**
 * Restore attestations (docs/api-rules.md#attestations): a drill's result, recorded for a READY backup its caller may
 * read and shown to whoever may read that backup. The caller's read of the backup is the route's (ReadPolicy); this
 * service keeps what was checked, bounded per backup, and lists what a reader may see.
 */
import { v7 as uuidv7 } from 'uuid';
import {
  ATTESTATIONS_KEPT_PER_BACKUP,
  ATTESTATION_LIST_MAX,
  type CheckedAttestation,
  type RestoreAttestation,
} from '../domain/attestations.js';
import type { Clock } from '../domain/clock.js';
import type { Backup } from '../domain/entities.js';
import { AppError } from '../domain/errors.js';
import type { Stores } from '../store/ports/stores.js';
import type { Reader } from './read-policy.js';

export class AttestationService {
  constructor(
    private readonly ports: Pick<Stores, 'attestations' | 'accounts'>,
    private readonly clock: Clock,
    private readonly keepPerBackup = ATTESTATIONS_KEPT_PER_BACKUP,
  ) {}

  /**
   * Stores `checked` for `backup` (one the caller may read, as ReadPolicy.getReadable gave it), recorded by the
   * credential `recordedBy`. Only a READY backup has been drilled: any other state is 409 invalid_backup_state.
   */
  async record(recordedBy: string, backup: Backup, checked: CheckedAttestation): Promise<RestoreAttestation> {
    if (backup.status !== 'READY') {
      throw new AppError('invalid_backup_state', `The backup is ${backup.status}: only a READY backup can be attested.`, {
        status: backup.status,
      });
    }
    if (checked.backupId !== backup.id || checked.accountId !== backup.accountId) {
      throw new Error('an attestation checked for another backup');
    }
    const attestation: RestoreAttestation = { id: uuidv7(), recordedAt: this.clock.now(), recordedBy, ...checked };
    await this.ports.attestations.recordAttestation(attestation, this.keepPerBackup);
    return attestation;
  }

  /** The attestations of `backup` (one the caller may read), newest first. */
  listForBackup(backup: Backup): Promise<RestoreAttestation[]> {
    return this.ports.attestations.listBackupAttestations(backup.id, this.keepPerBackup);
  }

  /**
   * The attestations of the READY backups `reader` may read: its account's and, unless its credential is append-only,
   * its host accounts' (docs/api-rules.md#host-accounts); newest first, at most `limit`.
   */
  async listVisible(reader: Reader, limit: number): Promise<RestoreAttestation[]> {
    const hosts = reader.appendOnly ? [] : await this.ports.accounts.listHostAccounts(reader.accountId);
    const accountIds = [reader.accountId, ...hosts.map((host) => host.id)];
    return this.ports.attestations.listAccountAttestations(accountIds, this.clock.now(), Math.min(limit, ATTESTATION_LIST_MAX));
  }
}
