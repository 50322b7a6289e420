/**
 * Wire schemas of the console's own endpoints (/console/api/*) as TypeBox: they validate the requests, serialize
 * the answers, and the page (console/src/api.ts) derives its types from them with `import type`. Pure, like all of
 * src/contract: TypeBox, domain/ and the API's schemas only, so the page's type check reads no server code.
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { ACTOR_KINDS, AUDIT_ACTIONS, AUDIT_OUTCOMES, type ActorKind, type AuditAction, type AuditOutcome } from '../domain/audit.js';
import { BACKUP_STATUSES, MAX_DELETION_GRACE_DAYS, type BackupStatus } from '../domain/backups.js';
import { KEY_LABEL_MAX, KEY_STATUSES, type KeyStatus } from '../domain/keys.js';
import { BACKUP_INTERVALS, PLANS, type BackupInterval, type Plan } from '../domain/plans.js';
import { SCOPES, type Scope } from '../domain/scopes.js';
import { DeleteBackupResponse, backupRecordFields } from './schemas.js';

const DateTime = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Count = Type.Integer({ minimum: 0 });
const closed = { additionalProperties: false } as const;

const PlanName = Type.Unsafe<Plan>({ type: 'string', enum: [...PLANS] });
const ScopeName = Type.Unsafe<Scope>({ type: 'string', enum: [...SCOPES] });

// ---- requests ----

export const SignInBody = Type.Object(
  {
    loginToken: Type.Optional(Type.String({ maxLength: 200 })),
    apiKey: Type.Optional(Type.String({ maxLength: 200 })),
  },
  closed,
);

export const CreateKeyBody = Type.Object(
  {
    scopes: Type.Array(ScopeName, { minItems: 1, maxItems: 3, uniqueItems: true }),
    expiresInDays: Nullable(Type.Integer({ minimum: 1, maximum: 3650 })),
    /** May not delete backups, reset, rotate or bootstrap over the vault (a host's key). Default false. */
    appendOnly: Type.Optional(Type.Boolean()),
    /** The owner's name for the key, checked by the service (letters, digits, spaces and a few signs). */
    label: Type.Optional(Type.String({ minLength: 1, maxLength: KEY_LABEL_MAX })),
  },
  closed,
);

/** A host account made from the console (its own schedule, the same vault): its name and its key's lifetime. */
export const CreateHostAccountBody = Type.Object(
  {
    /** 1–40 letters, digits, spaces, dots, dashes, underscores (checked by the service, as for `coffer admin accounts add-host`). */
    label: Type.String({ minLength: 1, maxLength: 40 }),
    expiresInDays: Nullable(Type.Integer({ minimum: 1, maximum: 3650 })),
  },
  closed,
);

export const KeyParams = Type.Object({ id: Type.String({ maxLength: 64 }) });

/** A backup or vault-history id in a console path (checked as a UUID by the service: anything else is 404). */
export const RetentionParams = Type.Object({ id: Type.String({ maxLength: 64 }) });

export const DeletionGraceBody = Type.Object({ days: Type.Integer({ minimum: 0, maximum: MAX_DELETION_GRACE_DAYS }) }, closed);

// ---- answers ----

export const ConsoleSession = Type.Object(
  {
    accountId: Type.String(),
    plan: PlanName,
    signedInWith: Type.Union([Type.Literal('login-link'), Type.Literal('api-key')]),
    keyId: Nullable(Type.String()),
    createdAt: DateTime,
    expiresAt: DateTime,
    csrfToken: Type.String(),
  },
  closed,
);

export const Overview = Type.Object(
  {
    accountId: Type.String(),
    /** The operator's name for the account (`coffer admin accounts set-label`); null: none. */
    accountLabel: Nullable(Type.String()),
    plan: PlanName,
    backupInterval: Type.Unsafe<BackupInterval>({ type: 'string', enum: [...BACKUP_INTERVALS] }),
    intervalWords: Type.String(),
    retentionDays: Count,
    backups: Type.Object({ count: Count, ready: Count, newestCreatedAt: Nullable(DateTime), storedCiphertextBytes: Count }, closed),
    /** Bytes counted against the quota (READY, in deletion grace, uploads in progress) and the quota (null: none). */
    storage: Type.Object({ storedBytes: Count, quotaBytes: Nullable(Count) }, closed),
    cadence: Type.Object(
      {
        lastReadyBackupCreatedAt: Nullable(DateTime),
        /** When the newest listed backup reached READY (null: none listed). */
        lastReadyAt: Nullable(DateTime),
        /** No backup reached READY within twice the interval (counted from the account's creation when none ever did). */
        overdue: Type.Boolean(),
        nextAllowedAt: Nullable(DateTime),
        inFlightBackupId: Nullable(Type.String()),
      },
      closed,
    ),
    vault: Type.Object(
      {
        initialized: Type.Boolean(),
        cryptoVersion: Nullable(Type.String()),
        kdf: Nullable(Type.Object({ algorithm: Type.String(), opslimit: Count, memlimit: Count, saltBytes: Count }, closed)),
        createdAt: Nullable(DateTime),
        updatedAt: Nullable(DateTime),
        lastRotatedAt: Nullable(DateTime),
      },
      closed,
    ),
  },
  closed,
);

const keyFields = {
  keyId: Type.String(),
  scopes: Type.Array(ScopeName),
  /** May not delete backups, reset, rotate or bootstrap over the vault. */
  appendOnly: Type.Boolean(),
  /** The owner's name for the key ("laptop"); null: none. */
  label: Nullable(Type.String()),
  createdAt: DateTime,
  expiresAt: Nullable(DateTime),
  revokedAt: Nullable(DateTime),
  status: Type.Unsafe<KeyStatus>({ type: 'string', enum: [...KEY_STATUSES] }),
  /** The key this session was opened with: revoking it signs the page out. */
  usedByThisSession: Type.Boolean(),
};

export const ConsoleKey = Type.Object(keyFields, closed);
export const ConsoleKeyList = Type.Object({ keys: Type.Array(ConsoleKey) }, closed);
/** A new key: its secret, shown once, and whether its expiry was cut to the session's credential. */
export const CreatedKey = Type.Object({ ...keyFields, apiKey: Type.String(), expiryCapped: Type.Boolean() }, closed);

/** The host account just made, and its append-only key (shown once). */
export const CreatedHostAccount = Type.Object(
  {
    accountId: Type.String(),
    label: Type.String(),
    plan: Type.String(),
    /** The plan's interval between two backups, as GET /api/host-accounts gives it (e.g. "30m"). */
    backupInterval: Type.String(),
    keyId: Type.String(),
    apiKey: Type.String(),
    scopes: Type.Array(Type.String()),
    appendOnly: Type.Boolean(),
    expiresAt: Nullable(DateTime),
    /** How many host accounts this account has now, and how many the console may make. */
    hostAccounts: Type.Integer(),
    hostAccountLimit: Type.Integer(),
  },
  closed,
);

/** One entry of the account's audit trail (src/domain/audit.ts): never a secret. */
export const AuditEvent = Type.Object(
  {
    id: Type.String(),
    at: DateTime,
    action: Type.Unsafe<AuditAction>({ type: 'string', enum: [...AUDIT_ACTIONS] }),
    outcome: Type.Unsafe<AuditOutcome>({ type: 'string', enum: [...AUDIT_OUTCOMES] }),
    actor: Type.Object({ kind: Type.Unsafe<ActorKind>({ type: 'string', enum: [...ACTOR_KINDS] }), id: Nullable(Type.String()) }, closed),
    /** The label of the key that acted (actor.kind "key"), as its owner named it; null: none. */
    actorLabel: Nullable(Type.String()),
    /** The label of the key made or revoked (key.create, key.revoke); null: none. */
    targetLabel: Nullable(Type.String()),
    /** This session's own actions are marked, like the key list marks its key. */
    byThisSession: Type.Boolean(),
    address: Nullable(Type.String()),
    target: Nullable(Type.String()),
    detail: Nullable(Type.String()),
  },
  closed,
);
/** The account's trail, newest first, and the bound on how many entries are kept (per outcome: done, refused). */
export const AuditList = Type.Object({ events: Type.Array(AuditEvent), maxEntries: Count }, closed);

export const About = Type.Object(
  {
    name: Type.String(),
    version: Type.String(),
    /** The Node.js versions the CLI runs on (package.json engines, what scripts/check-node.mjs and `coffer` enforce). */
    nodeEngine: Type.String(),
    publicUrl: Type.String(),
    cli: Nullable(
      Type.Object({ url: Type.String(), install: Type.String(), bytes: Count, sha256: Type.String(), integrity: Type.String() }, closed),
    ),
  },
  closed,
);

const Status = Type.Unsafe<BackupStatus>({ type: 'string', enum: [...BACKUP_STATUSES] });

/**
 * Every visible backup's wrapped data key in one answer (GET /console/api/backup-keys), so the page can show which
 * key each backup uses, and check a recovery kit, without one request per backup. The same fields as each backup's
 * detail; the page never trusts a fingerprint it could not confirm by opening the key.
 */
export const BackupKeyList = Type.Object(
  {
    backups: Type.Array(
      Type.Object(
        {
          id: Type.String(),
          status: Status,
          wrappedDek: Nullable(Type.String()),
          wrappedDekNonce: Nullable(Type.String()),
          /** Sealed with the backup's data key: the page opens it once the vault is unlocked there (name, source). */
          encryptedMetadata: Nullable(Type.String()),
          encryptedMetadataNonce: Nullable(Type.String()),
          /** The host account it belongs to (the Backups page lists them with the account's own); null: the account's own. */
          hostAccountId: Nullable(Type.String()),
        },
        closed,
      ),
    ),
  },
  closed,
);
// ---- deletion grace and vault history ----

/** A backup scheduled for deletion: its record, restorable until purgeAfter. */
export const ScheduledBackup = Type.Object(
  {
    ...backupRecordFields,
    /** When it was deleted. */
    deletedAt: DateTime,
    /** When its ciphertext goes for good (the grace ends, or the plan's retention if sooner). */
    purgeAfter: DateTime,
  },
  closed,
);

export const Deletions = Type.Object(
  {
    deletionGraceDays: Count,
    maxDeletionGraceDays: Count,
    /** Minutes a sign-in counts as fresh for purging, shortening the grace and restoring an envelope. */
    freshSignInMinutes: Count,
    /** Whether this session's sign-in is fresh now. */
    freshSignIn: Type.Boolean(),
    scheduled: Type.Array(ScheduledBackup),
    /** Ciphertext still stored for the scheduled backups (it counts as stored until purged). */
    scheduledCiphertextBytes: Count,
  },
  closed,
);

export const DeletionGrace = Type.Object({ deletionGraceDays: Count }, closed);

/** A backup restored or purged: the same answer as DELETE /api/backups/{id}. */
export const BackupOutcome = Type.Ref(DeleteBackupResponse);

const Actor = Type.Object(
  {
    kind: Type.Union([Type.Literal('api-key'), Type.Literal('console-session'), Type.Literal('operator'), Type.Literal('unknown')]),
    id: Nullable(Type.String()),
  },
  closed,
);

export const VaultHistoryItem = Type.Object(
  {
    id: Type.String(),
    reason: Type.Union([Type.Literal('rotate'), Type.Literal('reset'), Type.Literal('restore')]),
    replacedAt: DateTime,
    replacedBy: Actor,
    /** When this envelope had been stored (it was the vault from then until replacedAt). */
    storedAt: DateTime,
    expiresAt: DateTime,
    kdf: Type.Object({ opslimit: Count, memlimit: Count }, closed),
  },
  closed,
);

export const VaultHistory = Type.Object(
  { deletionGraceDays: Count, freshSignIn: Type.Boolean(), entries: Type.Array(VaultHistoryItem) },
  closed,
);

export const RestoredVault = Type.Object({ restoredAt: DateTime }, closed);
