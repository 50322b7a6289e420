/**
 * Wire schemas of the operator console (/admin/api/*, docs/operations.md#operator-console) as TypeBox. Ids, plans,
 * counts, bytes and times only: no field can carry a file name, sealed metadata, a wrapped key, an envelope or key
 * material (every object is closed). Pure: the admin page (console/src/admin/) derives its types from them.
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { ACTOR_KINDS, AUDIT_ACTIONS, AUDIT_OUTCOMES, type ActorKind, type AuditAction, type AuditOutcome } from '../domain/audit.js';
import { MAX_DELETION_GRACE_DAYS } from '../domain/backups.js';
import { KEY_STATUSES, type KeyStatus } from '../domain/keys.js';
import { PLANS, type Plan } from '../domain/plans.js';
import { SCOPES, type Scope } from '../domain/scopes.js';

const DateTime = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Count = Type.Integer({ minimum: 0 });
const closed = { additionalProperties: false } as const;
const PlanName = Type.Unsafe<Plan>({ type: 'string', enum: [...PLANS] });

// ---- requests ----

export const OperatorSignInBody = Type.Object({ loginToken: Type.String({ maxLength: 200 }) }, closed);
export const AccountParams = Type.Object({ id: Type.String({ maxLength: 64 }) });
export const AccountKeyParams = Type.Object({ id: Type.String({ maxLength: 64 }), keyId: Type.String({ maxLength: 64 }) });
export const PlanBody = Type.Object({ plan: Type.Union(PLANS.map((plan) => Type.Literal(plan))) }, closed);
/** The account's own quota: bytes, null for none, or "plan" to follow its plan's again. */
export const QuotaBody = Type.Object(
  { quota: Type.Union([Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.Null(), Type.Literal('plan')]) },
  closed,
);
/** The operator's name for the account (the rules of a key's label), or null to remove it. */
export const LabelBody = Type.Object({ label: Nullable(Type.String({ maxLength: 200 })) }, closed);
export const GraceBody = Type.Object({ days: Type.Integer({ minimum: 0, maximum: MAX_DELETION_GRACE_DAYS }) }, closed);

// ---- answers ----

export const OperatorSessionBody = Type.Object(
  { operator: Nullable(Type.String()), createdAt: DateTime, expiresAt: DateTime, csrfToken: Type.String() },
  closed,
);

export const AccountRow = Type.Object(
  {
    accountId: Type.String(),
    plan: PlanName,
    createdAt: DateTime,
    deletionGraceDays: Count,
    /** READY backups. */
    backups: Count,
    /** Deleted backups still restorable (their ciphertext is kept and counted in storedBytes). */
    graceBackups: Count,
    uploadingBackups: Count,
    /** Ciphertext bytes: READY backups, backups in their deletion grace, uploads in progress. */
    storedBytes: Count,
    lastReadyAt: Nullable(DateTime),
    /** No READY backup for more than twice the plan's interval. */
    overdue: Type.Boolean(),
    /** Active API keys. */
    keys: Count,
    /** The storage quota that applies, in bytes (the account's own, else its plan's; a host account's: its owner's); null: none. */
    quotaBytes: Nullable(Count),
    /** Where the quota comes from: the plan's setting (COFFER_QUOTA_<PLAN>), the account's own, or its owner's. */
    quotaSource: Type.Union([Type.Literal('plan'), Type.Literal('account'), Type.Literal('owner')]),
    /** The operator's name for the account (`coffer admin accounts set-label`); null: none. */
    label: Nullable(Type.String()),
    /** A host account's owner (whose plan and quota it shares); null otherwise. */
    ownerAccountId: Nullable(Type.String()),
    /** A host account's name as its owner gave it ("web"); null otherwise. */
    hostLabel: Nullable(Type.String()),
    /** An owner with host accounts: the owner and its host accounts together, against the owner's quota; else null. */
    fleet: Nullable(Type.Object({ accounts: Count, storedBytes: Count, backups: Count, atQuota: Type.Boolean() }, closed)),
    /** When the server recorded the account's newest restore drill; null: never drilled. */
    lastDrillAt: Nullable(DateTime),
    /** What that drill reported, as its client claimed it (the server cannot check an attestation); null: never. */
    lastDrillResult: Nullable(Type.Union([Type.Literal('passed'), Type.Literal('failed')])),
    /** Drilled, but the newest drill is older than COFFER_DRILL_MAX_AGE. */
    drillStale: Type.Boolean(),
    /** Backups (not DELETED) whose object the store keeps locked (S3 Object Lock). */
    lockedBackups: Count,
    /** DELETED records whose object is still locked (it stays in the bucket until then). */
    lockedDeletedBackups: Count,
    /** The latest date until which one of those objects is locked; null: none. */
    lockedUntil: Nullable(DateTime),
  },
  closed,
);

/** A backup whose object the store keeps locked: id, status, size and until when (never its metadata). */
export const LockedBackupRow = Type.Object(
  { backupId: Type.String(), status: Type.String(), ciphertextSizeBytes: Nullable(Count), lockedUntil: DateTime },
  closed,
);

export const Overview = Type.Object(
  {
    accounts: Type.Array(AccountRow),
    totals: Type.Object(
      {
        plans: Type.Array(Type.Object({ plan: PlanName, accounts: Count, storedBytes: Count }, closed)),
        accounts: Count,
        storedBytes: Count,
        /** READY backups (or deleted since, in their grace) created in the last 24 hours. */
        backupsLast24h: Count,
        overdue: Count,
        /** Accounts with a restore drill recorded; of those, the stale ones and those whose newest drill reported failed. */
        drilledAccounts: Count,
        staleDrillAccounts: Count,
        failedDrillAccounts: Count,
      },
      closed,
    ),
    server: Type.Object(
      {
        version: Type.String(),
        database: Type.Union([Type.Literal('sqlite'), Type.Literal('postgres')]),
        blobStore: Type.Union([Type.Literal('fs'), Type.Literal('s3')]),
        migrations: Type.Array(Type.String()),
        now: DateTime,
        /** COFFER_DRILL_MAX_AGE in milliseconds. */
        drillMaxAgeMs: Count,
      },
      closed,
    ),
  },
  closed,
);

export const OperatorKey = Type.Object(
  {
    keyId: Type.String(),
    scopes: Type.Array(Type.Unsafe<Scope>({ type: 'string', enum: [...SCOPES] })),
    appendOnly: Type.Boolean(),
    createdAt: DateTime,
    expiresAt: Nullable(DateTime),
    revokedAt: Nullable(DateTime),
    status: Type.Unsafe<KeyStatus>({ type: 'string', enum: [...KEY_STATUSES] }),
    /** The owner's name for the key; null: none. */
    label: Nullable(Type.String()),
  },
  closed,
);

export const OperatorAuditEvent = Type.Object(
  {
    id: Type.String(),
    at: DateTime,
    action: Type.Unsafe<AuditAction>({ type: 'string', enum: [...AUDIT_ACTIONS] }),
    outcome: Type.Unsafe<AuditOutcome>({ type: 'string', enum: [...AUDIT_OUTCOMES] }),
    actor: Type.Object({ kind: Type.Unsafe<ActorKind>({ type: 'string', enum: [...ACTOR_KINDS] }), id: Nullable(Type.String()) }, closed),
    address: Nullable(Type.String()),
    target: Nullable(Type.String()),
    detail: Nullable(Type.String()),
  },
  closed,
);

export const AccountDetail = Type.Object(
  {
    account: AccountRow,
    /** A host account's owner; null for an ordinary account. */
    owner: Nullable(AccountRow),
    /** An owner's host accounts, oldest first. */
    hosts: Type.Array(AccountRow),
    keys: Type.Array(OperatorKey),
    /** The account's backups whose object is locked (DELETED records included), latest retain-until first. */
    locked: Type.Array(LockedBackupRow),
    audit: Type.Array(OperatorAuditEvent),
  },
  closed,
);

export const OwnerLink = Type.Object({ accountId: Type.String(), url: Type.String(), expiresAt: DateTime }, closed);
