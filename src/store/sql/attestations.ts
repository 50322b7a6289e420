/** AttestationStore on SQL: restore attestations, bounded per backup. */
import type { Selectable } from 'kysely';
import type { AttestationResult, RestoreAttestation } from '../../domain/attestations.js';
import type { AttestationStore } from '../ports/attestations.js';
import type { RestoreAttestationsTable } from '../schema.js';
import type { SqlContext } from './context.js';
import { num } from './rows.js';

function toAttestation(row: Selectable<RestoreAttestationsTable>): RestoreAttestation {
  return {
    id: row.id,
    accountId: row.account_id,
    backupId: row.backup_id,
    recordedAt: num(row.recorded_at),
    recordedBy: row.recorded_by,
    checkedAt: num(row.checked_at),
    result: row.result as AttestationResult,
    payload: row.payload,
    mac: row.mac,
  };
}

export class SqlAttestationStore implements AttestationStore {
  constructor(private readonly ctx: SqlContext) {}

  async recordAttestation(attestation: RestoreAttestation, keepPerBackup: number): Promise<void> {
    await this.ctx.transaction(async (trx) => {
      await trx
        .insertInto('restore_attestations')
        .values({
          id: attestation.id,
          account_id: attestation.accountId,
          backup_id: attestation.backupId,
          recorded_at: attestation.recordedAt,
          recorded_by: attestation.recordedBy,
          checked_at: attestation.checkedAt,
          result: attestation.result,
          payload: attestation.payload,
          mac: attestation.mac,
        })
        .execute();
      // The bound: of this backup's attestations, everything older than the newest `keepPerBackup` goes (found on
      // the (backup_id, recorded_at) index).
      const newestDropped = await trx
        .selectFrom('restore_attestations')
        .select(['recorded_at', 'id'])
        .where('backup_id', '=', attestation.backupId)
        .orderBy('recorded_at', 'desc')
        .orderBy('id', 'desc')
        .limit(1)
        .offset(keepPerBackup)
        .executeTakeFirst();
      if (!newestDropped) return;
      const at = num(newestDropped.recorded_at);
      await trx
        .deleteFrom('restore_attestations')
        .where('backup_id', '=', attestation.backupId)
        .where((eb) => eb.or([eb('recorded_at', '<', at), eb.and([eb('recorded_at', '=', at), eb('id', '<=', newestDropped.id)])]))
        .execute();
    });
  }

  async listBackupAttestations(backupId: string, limit: number): Promise<RestoreAttestation[]> {
    const rows = await this.ctx.db
      .selectFrom('restore_attestations')
      .selectAll()
      .where('backup_id', '=', backupId)
      .orderBy('recorded_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toAttestation);
  }

  async listAccountAttestations(accountIds: readonly string[], now: number, limit: number): Promise<RestoreAttestation[]> {
    if (accountIds.length === 0) return [];
    const rows = await this.ctx.db
      .selectFrom('restore_attestations')
      .innerJoin('backups', 'backups.id', 'restore_attestations.backup_id')
      .selectAll('restore_attestations')
      .where('restore_attestations.account_id', 'in', accountIds)
      .where('backups.account_id', 'in', accountIds)
      .where('backups.status', '=', 'READY')
      .where('backups.expires_at', '>', now)
      .orderBy('restore_attestations.recorded_at', 'desc')
      .orderBy('restore_attestations.id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toAttestation);
  }
}
