/** Domain records → wire bodies (the serializer then enforces the schema). */
import { PLAN_RULES } from '../domain/plans.js';
import type { AccountView } from '../services/backups.js';
import { iso } from '../domain/time.js';
import type { Backup } from '../store/store.js';
import type { BackupDetailBody, BackupListBody, BackupRecordBody, BackupStatusEventBody } from './schemas.js';

/**
 * The account body. `withheld` (an append-only caller): the wrapped master key, its nonce and the KDF parameters are
 * null even when a vault exists, so a stolen host key cannot take them away and guess the passphrase offline
 * (docs/api-rules.md#account).
 */
export function accountBody({ account, vault }: AccountView, withheld = false) {
  const material = withheld ? undefined : vault;
  return {
    initialized: vault !== undefined,
    backupInterval: PLAN_RULES[account.plan].interval,
    cryptoVersion: vault?.cryptoVersion ?? null,
    kdf: material ? { ...material.kdf } : null,
    wrappedMasterKey: material?.wrappedMasterKey ?? null,
    wrappedMasterKeyNonce: material?.wrappedMasterKeyNonce ?? null,
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

/** Serialized list bodies by the record array they were made from; only frozen arrays, which cannot change. */
const listBodies = new WeakMap<readonly Backup[], string>();

/**
 * The list body, serialized by `serialize` (the route's response serializer). The metadata cache hands out the same
 * frozen array until the account changes (src/store/cached-store.ts), so an unchanged list is converted and
 * serialized once, not on every poll (bench P3).
 */
export function serializedList(records: readonly Backup[], serialize: (body: BackupListBody) => string): string {
  let body = listBodies.get(records);
  if (body === undefined) {
    body = serialize({ backups: records.map(recordBody) });
    if (Object.isFrozen(records) && records.every((record) => Object.isFrozen(record))) listBodies.set(records, body);
  }
  return body;
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
