/**
 * The API's wire schemas as TypeBox: the same objects validate requests, serialize responses and become
 * the OpenAPI components (each has an $id, registered with app.addSchema and referenced with Type.Ref).
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { BACKUP_STATUSES, type BackupStatus as BackupStatusValue } from '../domain/backups.js';
import { BACKUP_INTERVALS, type BackupInterval } from '../domain/plans.js';

const BASE64 = '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$';
const PRINTABLE = '^[\\x20-\\x7E]*$';

/** Standard base64 with padding; the decoded-size bounds of docs/api-rules.md#encoding are checked after the schema. */
const Base64 = (maxBytes: number, description: string) =>
  Type.String({
    pattern: BASE64,
    minLength: 4,
    maxLength: 4 * Math.ceil(maxBytes / 3),
    contentEncoding: 'base64',
    description,
  });
const DateTime = Type.String({ format: 'date-time' });
const Uuid = Type.String({ format: 'uuid' });
const Version = Type.String({ maxLength: 64, pattern: PRINTABLE });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const CryptoVersion = Type.Literal('v1');

export const BackupKdf = Type.Object(
  {
    salt: Base64(64, 'Argon2id salt, base64 (8–64 bytes).'),
    opslimit: Type.Integer({ minimum: 1, maximum: 4_294_967_295 }),
    memlimit: Type.Integer({ minimum: 1, maximum: 4_398_046_511_104 }),
  },
  { $id: 'BackupKdf', additionalProperties: false },
);

export const BackupAccountEnvelope = Type.Object(
  {
    cryptoVersion: CryptoVersion,
    kdf: Type.Ref(BackupKdf),
    wrappedMasterKey: Base64(4096, 'Master key wrapped by the client, base64 (16–4096 bytes).'),
    wrappedMasterKeyNonce: Base64(64, 'Nonce of the master key wrapping, base64 (8–64 bytes).'),
  },
  { $id: 'BackupAccountEnvelope', additionalProperties: false },
);

const backupAccountFields = {
  initialized: Type.Boolean(),
  backupInterval: Type.Unsafe<BackupInterval>({ type: 'string', enum: [...BACKUP_INTERVALS] }),
  cryptoVersion: Nullable(Type.String()),
  kdf: Nullable(Type.Ref(BackupKdf)),
  wrappedMasterKey: Nullable(Type.String()),
  wrappedMasterKeyNonce: Nullable(Type.String()),
};

export const BackupAccount = Type.Object(backupAccountFields, { $id: 'BackupAccount', additionalProperties: false });
export const BootstrapResponse = Type.Object(
  { ...backupAccountFields, created: Type.Boolean() },
  { $id: 'BackupAccountBootstrapResponse', additionalProperties: false },
);
export const RotateResponse = Type.Object(
  { ...backupAccountFields, rotated: Type.Boolean() },
  { $id: 'BackupAccountRotateResponse', additionalProperties: false },
);

export const ResetRequest = Type.Object(
  { deleteBackups: Type.Optional(Type.Boolean({ default: false })) },
  { $id: 'BackupAccountResetRequest', additionalProperties: false },
);
export const ResetResponse = Type.Object(
  { reset: Type.Boolean(), accountDeleted: Type.Boolean(), deletedBackups: Type.Integer({ minimum: 0 }) },
  { $id: 'BackupAccountResetResponse', additionalProperties: false },
);

export const BackupStatus = Type.Unsafe<BackupStatusValue>({
  $id: 'BackupStatus',
  type: 'string',
  enum: [...BACKUP_STATUSES],
});

/** A backup record's fields, shared with the console's scheduled backups (console-schemas.ts). */
export const backupRecordFields = {
  id: Uuid,
  status: Type.Ref(BackupStatus),
  createdAt: DateTime,
  expiresAt: DateTime,
  ciphertextSizeBytes: Nullable(Type.Integer({ minimum: 0 })),
  plaintextSizeBytes: Nullable(Type.Integer({ minimum: 0 })),
  clientVersion: Nullable(Type.String()),
  hostappVersion: Nullable(Type.String()),
};

export const BackupRecord = Type.Object(backupRecordFields, { $id: 'BackupRecord', additionalProperties: false });

export const BackupDetail = Type.Object(
  {
    ...backupRecordFields,
    cryptoVersion: CryptoVersion,
    wrappedDek: Nullable(Type.String()),
    wrappedDekNonce: Nullable(Type.String()),
    encryptedMetadata: Nullable(Type.String()),
    encryptedMetadataNonce: Nullable(Type.String()),
  },
  { $id: 'BackupDetail', additionalProperties: false },
);

export const BackupList = Type.Object({ backups: Type.Array(Type.Ref(BackupRecord)) }, { $id: 'BackupList', additionalProperties: false });

export const BackupFinalizeRequest = Type.Object(
  {
    cryptoVersion: CryptoVersion,
    wrappedDek: Base64(
      4096,
      'Data key wrapped with the master key (48 bytes) or sealed to a recipient (1180 bytes), base64 (16–4096 bytes).',
    ),
    wrappedDekNonce: Base64(64, 'Nonce of the data key wrapping, base64 (8–64 bytes).'),
    encryptedMetadata: Base64(65_536, 'Metadata sealed with the data key, base64 (1 byte–64 KiB).'),
    encryptedMetadataNonce: Base64(64, 'Nonce of the metadata sealing, base64 (8–64 bytes).'),
    ciphertextSizeBytes: Type.Integer({ minimum: 0 }),
    plaintextSizeBytes: Type.Integer({ minimum: 0 }),
    clientVersion: Type.Optional(Version),
    hostappVersion: Type.Optional(Version),
  },
  { $id: 'BackupFinalizeRequest', additionalProperties: false },
);

export const DirectUploadInstruction = Type.Object(
  {
    method: Type.Literal('POST'),
    protocol: Type.Literal('direct'),
    uploadUrl: Type.String(),
    contentType: Type.Literal('application/octet-stream'),
  },
  { $id: 'DirectUploadInstruction', additionalProperties: false },
);

export const ClientUploadInstruction = Type.Object(
  {
    method: Type.Literal('POST'),
    protocol: Type.Literal('blobhost-client'),
    handleUploadUrl: Type.String(),
    contentType: Type.Literal('application/octet-stream'),
  },
  { $id: 'ClientUploadInstruction', additionalProperties: false },
);

export const CreateBackupResponse = Type.Object(
  {
    backupId: Uuid,
    blobPath: Type.String(),
    status: Type.Ref(BackupStatus),
    expiresAt: DateTime,
    upload: Type.Union([Type.Ref(DirectUploadInstruction), Type.Ref(ClientUploadInstruction)]),
  },
  { $id: 'CreateBackupResponse', additionalProperties: false },
);

export const DirectUploadResponse = Type.Object(
  { pathname: Type.String(), size: Type.Integer({ minimum: 0 }) },
  { $id: 'DirectUploadResponse', additionalProperties: false },
);

export const ClientUploadResponse = Type.Object(
  {},
  {
    $id: 'ClientUploadResponse',
    additionalProperties: true,
    description: 'Client-negotiation response (free-form JSON object).',
  },
);

export const DeleteBackupResponse = Type.Object(
  { id: Uuid, status: Type.Ref(BackupStatus), deletedAt: Nullable(DateTime) },
  { $id: 'DeleteBackupResponse', additionalProperties: false },
);

export const BackupStatusEvent = Type.Object(
  {
    backupId: Uuid,
    status: Type.Ref(BackupStatus),
    createdAt: DateTime,
    expiresAt: DateTime,
    ciphertextSizeBytes: Nullable(Type.Integer({ minimum: 0 })),
    plaintextSizeBytes: Nullable(Type.Integer({ minimum: 0 })),
    clientVersion: Nullable(Type.String()),
    hostappVersion: Nullable(Type.String()),
    observedAt: DateTime,
  },
  { $id: 'BackupStatusEvent', additionalProperties: false },
);

export const ErrorResponse = Type.Object(
  {
    error: Type.String(),
    code: Type.String(),
    message: Type.String(),
    resolution: Type.String(),
    details: Type.Optional(Type.Object({}, { additionalProperties: true })),
  },
  { $id: 'ErrorResponse', additionalProperties: false },
);

/** The last frame of a status stream after a terminal status, its timeout or a shutdown (not a component). */
export const BackupStreamClosed = Type.Object(
  {
    backupId: Type.String({ format: 'uuid' }),
    reason: Type.Unsafe<'terminal' | 'timeout' | 'shutdown'>({ type: 'string', enum: ['terminal', 'timeout', 'shutdown'] }),
    status: Type.Ref(BackupStatus),
    observedAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

/** The last frame of a status stream after a failure, or its only one over the open-stream caps (not a component). */
export const BackupStreamError = Type.Composite([ErrorResponse, Type.Object({ backupId: Type.String({ format: 'uuid' }) })], {
  additionalProperties: false,
});

export const BackupIdParams = Type.Object({ id: Uuid }, { additionalProperties: false });

/** Extension (docs/api-rules.md#host-accounts): a host account as its owner sees it. */
export const HostAccount = Type.Object(
  {
    accountId: Uuid,
    label: Type.String({ description: 'The name its owner gave it, e.g. "web".' }),
    backupInterval: Type.Union([Type.Literal('30m'), Type.Literal('4h'), Type.Literal('1d')], {
      description: "The host account's own cadence (its plan's interval).",
    }),
    createdAt: Type.String({ format: 'date-time' }),
    vault: Type.Union([Type.Literal('shared'), Type.Literal('diverged'), Type.Literal('none')], {
      description:
        "`shared`: it holds the owner's vault envelope (the owner's passphrase and recipient); `diverged`: another envelope " +
        '(its vault was changed on its own, or the owner reset and re-initialized theirs); `none`: no vault.',
    }),
  },
  { $id: 'HostAccount', additionalProperties: false },
);

export const HostAccountList = Type.Object(
  { hosts: Type.Array(Type.Ref(HostAccount)) },
  { $id: 'HostAccountList', additionalProperties: false },
);

/** Any text: an id that is not one of the caller's host accounts (malformed included) is a 404, never a 400. */
export const HostAccountParams = Type.Object({ accountId: Type.String() }, { additionalProperties: false });

/** Every schema that becomes an OpenAPI component, in registration order (referenced ones first). */
export const COMPONENT_SCHEMAS: TSchema[] = [
  BackupKdf,
  BackupAccountEnvelope,
  BackupAccount,
  BootstrapResponse,
  RotateResponse,
  ResetRequest,
  ResetResponse,
  BackupStatus,
  BackupRecord,
  BackupDetail,
  BackupList,
  BackupFinalizeRequest,
  DirectUploadInstruction,
  ClientUploadInstruction,
  CreateBackupResponse,
  DirectUploadResponse,
  ClientUploadResponse,
  DeleteBackupResponse,
  BackupStatusEvent,
  ErrorResponse,
  HostAccount,
  HostAccountList,
];

export type BackupAccountEnvelopeBody = Static<typeof BackupAccountEnvelope>;
export type BackupFinalizeBody = Static<typeof BackupFinalizeRequest>;
export type BackupDetailBody = Static<typeof BackupDetail>;
export type BackupRecordBody = Static<typeof BackupRecord>;
export type BackupStatusEventBody = Static<typeof BackupStatusEvent>;
export type ErrorResponseBody = Static<typeof ErrorResponse>;
export type BackupStreamClosedBody = Static<typeof BackupStreamClosed>;
export type BackupStreamErrorBody = Static<typeof BackupStreamError>;
export type BackupAccountBody = Static<typeof BackupAccount>;
export type BootstrapResponseBody = Static<typeof BootstrapResponse>;
export type RotateResponseBody = Static<typeof RotateResponse>;
export type ResetResponseBody = Static<typeof ResetResponse>;
export type BackupListBody = Static<typeof BackupList>;
export type HostAccountListBody = Static<typeof HostAccountList>;
export type CreateBackupResponseBody = Static<typeof CreateBackupResponse>;
export type DirectUploadResponseBody = Static<typeof DirectUploadResponse>;
export type DeleteBackupResponseBody = Static<typeof DeleteBackupResponse>;
