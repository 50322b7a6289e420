/**
 * Records → wire bodies (the serializer then enforces the schema). A view takes the fields it reads, not a store
 * type: src/store's records have them, and the contract stays below every layer that makes or reads a body.
 */
import { receivesWrappedKey } from '../domain/append-only.js';
import { type AppError, RESOLUTION_OF } from '../domain/errors.js';
import { PLAN_RULES, type Plan } from '../domain/plans.js';
import { iso, isoOrNull } from '../domain/time.js';
import type {
  BackupAccountBody,
  BackupAccountEnvelopeBody,
  BackupDetailBody,
  BackupRecordBody,
  BackupStatusEventBody,
  BackupStreamErrorBody,
  DeleteBackupResponseBody,
  ErrorResponseBody,
} from './schemas.js';

/** A stored backup as a body's source: the body's fields, its times in epoch milliseconds. */
type Stored<Body> = Omit<Body, 'createdAt' | 'expiresAt'> & { createdAt: number; expiresAt: number };
export type StoredBackupRecord = Stored<BackupRecordBody>;
export type StoredBackupDetail = Stored<BackupDetailBody>;

/** The backup account; for a credential that may not receive the wrapped key (an append-only key), without it. */
export function accountBody(
  { account, vault }: { account: { plan: Plan }; vault: BackupAccountEnvelopeBody | undefined },
  credential: { appendOnly: boolean },
): BackupAccountBody {
  const material = receivesWrappedKey(credential) ? vault : undefined;
  return {
    initialized: vault !== undefined,
    backupInterval: PLAN_RULES[account.plan].interval,
    cryptoVersion: vault?.cryptoVersion ?? null,
    kdf: material ? { ...material.kdf } : null,
    wrappedMasterKey: material?.wrappedMasterKey ?? null,
    wrappedMasterKeyNonce: material?.wrappedMasterKeyNonce ?? null,
  };
}

export function recordBody(backup: StoredBackupRecord): BackupRecordBody {
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

export function detailBody(backup: StoredBackupDetail): BackupDetailBody {
  return {
    ...recordBody(backup),
    cryptoVersion: backup.cryptoVersion,
    wrappedDek: backup.wrappedDek,
    wrappedDekNonce: backup.wrappedDekNonce,
    encryptedMetadata: backup.encryptedMetadata,
    encryptedMetadataNonce: backup.encryptedMetadataNonce,
  };
}

/** What a delete (and the console's restore or purge) left of a backup: DELETE /api/backups/{id}'s answer. */
export function outcomeBody(backup: StoredBackupRecord & { deletedAt: number | null }): DeleteBackupResponseBody {
  return { id: backup.id, status: backup.status, deletedAt: isoOrNull(backup.deletedAt) };
}

export function statusEventBody(backup: StoredBackupRecord, observedAt: number): BackupStatusEventBody {
  const { id, ...record } = recordBody(backup);
  return { backupId: id, ...record, observedAt: iso(observedAt) };
}

/** An ErrorResponse (docs/api-rules.md#errors): the error's own resolution, else its code's. */
export function errorBody(error: AppError): ErrorResponseBody {
  return {
    error: error.message,
    code: error.code,
    message: error.message,
    resolution: error.resolution ?? RESOLUTION_OF[error.code],
    ...(error.details ? { details: error.details } : {}),
  };
}

/** The `backup.stream.error` frame: the ErrorResponse and the backup it was about. */
export function streamErrorBody(error: AppError, backupId: string): BackupStreamErrorBody {
  return { ...errorBody(error), backupId };
}
