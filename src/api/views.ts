/** Domain records → wire bodies (the serializer then enforces the schema). */
import { PLAN_RULES } from '../domain/plans.js';
import type { AccountView } from '../services/backups.js';
import { iso } from '../domain/time.js';
import type { Backup } from '../store/store.js';
import type { BackupDetailBody, BackupRecordBody, BackupStatusEventBody } from './schemas.js';

export function accountBody({ account, vault }: AccountView) {
  return {
    initialized: vault !== undefined,
    backupInterval: PLAN_RULES[account.plan].interval,
    cryptoVersion: vault?.cryptoVersion ?? null,
    kdf: vault ? { ...vault.kdf } : null,
    wrappedMasterKey: vault?.wrappedMasterKey ?? null,
    wrappedMasterKeyNonce: vault?.wrappedMasterKeyNonce ?? null,
  };
}

export function recordBody(backup: Backup): BackupRecordBody {
  return {
    id: backup.id,
    status: backup.status,
    createdAt: iso(backup.createdAt),
    expiresAt: iso(backup.expiresAt),
    ciphertextSizeBytes: backup.ciphertextSizeBytes,
    plaintextSizeBytes: backup.plaintextSizeBytes,
    clientVersion: backup.clientVersion,
    hostappVersion: backup.hostappVersion,
  };
}

export function detailBody(backup: Backup): BackupDetailBody {
  return {
    ...recordBody(backup),
    cryptoVersion: backup.cryptoVersion,
    wrappedDek: backup.wrappedDek,
    wrappedDekNonce: backup.wrappedDekNonce,
    encryptedMetadata: backup.encryptedMetadata,
    encryptedMetadataNonce: backup.encryptedMetadataNonce,
  };
}

export function statusEventBody(backup: Backup, observedAt: number): BackupStatusEventBody {
  const { id, ...record } = recordBody(backup);
  return { backupId: id, ...record, observedAt: iso(observedAt) };
}
