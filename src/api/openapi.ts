/**
 * The documentation-only parts of /openapi.json: tag and operation descriptions and the frames of the event stream.
 * They reach the document through the @fastify/swagger `transform` (documentRoute), never the route schemas that
 * Fastify validates and serializes with, so nothing here can change what the server accepts or sends.
 */
import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifySchema } from 'fastify';
import { BackupStatusEvent, BackupStreamClosed, BackupStreamError } from '../contract/schemas.js';

export const API_TAGS = [
  {
    name: 'Backup account',
    description: "The account's vault: the KDF parameters and the master key wrapped by the client, and its reset.",
  },
  {
    name: 'Backups',
    description: 'One backup from slot to ciphertext: create, upload, finalize, then read, follow, download or delete it.',
  },
  {
    name: 'Host accounts',
    description:
      "Extension: accounts an owner added for backup hosts that keep their own cadence, with a copy of the owner's vault " +
      "envelope. The owner's credentials (not append-only) read their backups; nothing here writes.",
  },
  {
    name: 'Restore attestations',
    description:
      'Extension: what a restore drill reported of a backup (downloaded, decrypted and checked end to end, nothing ' +
      'written), as its client authenticated it with a key derived from the vault master key ' +
      '(docs/crypto.md#restore-attestations). The server stores and shows attestations; it cannot check, forge or ' +
      'alter one: clients verify them after unlocking (docs/api-rules.md#attestations).',
  },
];

/** How an API key may be restricted beyond its scopes (the security schemes' descriptions say it). */
export const API_KEY_RESTRICTIONS =
  'A key holds some of the scopes backups:read, backups:write and backups:restore. A key may also be append-only ' +
  '(a restriction, not a scope; key listings show it): it may do what its scopes allow except delete a backup, reset ' +
  'the account, rotate the vault envelope or bootstrap over an initialized vault, which answer ' +
  '`403 insufficient_scope` with `details.reason: "append_only"` and change nothing.';

/** By operationId; what each operation does beyond its summary (docs/api-rules.md has the reasons). */
const OPERATION_DESCRIPTIONS: Record<string, string> = {
  listHostAccounts:
    "The caller's host accounts: each has its own plan cadence and, while `vault` is `shared`, the caller's vault envelope " +
    "(rotations of the caller's vault are copied to it). An append-only key gets an empty list. Needs `backups:read`.",
  listHostAccountBackups:
    "A host account's visible backups, newest first, as `GET /api/backups` lists them. Any id that is not one of the " +
    "caller's host accounts (another account's, a malformed one) answers `404 not_found`, as does an append-only key. " +
    'Its backups are then read, followed and downloaded with the usual `/api/backups/{id}` operations; deleting them ' +
    'stays with the host account. Needs `backups:read`.',
  recordAttestation:
    "Extension. Stores a drill's attestation of a backup the caller may read (its own, or an owner's host account's " +
    'with a credential that is not append-only; any other id is `404 backup_not_found`). `payload` is standard base64 ' +
    "of at most 4096 bytes of UTF-8 JSON (AttestationPayload: its `backupId` must be the path's id, its `accountId` " +
    "the backup's account, `checkedAt` an RFC 3339 date-time; members it does not know are kept) and `mac` standard " +
    'base64 of 32 bytes; anything else is `400 validation_failed` naming the member. The backup must be `READY` (else ' +
    '`409 invalid_backup_state`, `details.status`). The server cannot check the mac: it stores both as sent and reads ' +
    '`checkedAt` and `result` to show them. A backup keeps its newest 20 attestations; recording another drops the ' +
    'oldest. Needs `backups:read` (a write-only key cannot drill).',
  listBackupAttestations:
    "Extension. A backup's attestations (at most 20), newest first by `recordedAt`, for any backup the caller may read " +
    "(as `GET /api/backups/{id}`; else `404 backup_not_found`). Unverified: check each `mac` with the vault's key " +
    'before trusting `result`. Needs `backups:read`.',
  listAttestations:
    "Extension. The attestations of every `READY` backup of the caller's account and, for a credential that is not " +
    "append-only, of its host accounts' backups, newest first by `recordedAt`; `limit` from 1 to 1000 (default 200), " +
    'else `400 validation_failed`. Attestations of deleted or expired backups are not listed. Unverified, as above. ' +
    'Needs `backups:read` (an API key or the console session).',
  getBackupAccount:
    "The plan's backup interval and, once the vault is bootstrapped, the KDF parameters and the wrapped master key " +
    'a client needs to unlock its backups. Needs `backups:read`.',
  updateBackupAccount:
    'Reserved: the cadence follows the plan. After authentication and the `backups:write` check it always answers ' +
    '`405 method_not_allowed` with `Allow: GET`, so it declares no success response.',
  bootstrapBackupAccount:
    'Stores the vault material the first time. On an initialized vault it answers `200` with `created: false` and ' +
    "changes nothing: replacing the material is rotate's job. Needs `backups:write`; an append-only key may bootstrap " +
    'only a vault that does not exist yet (else `403` with `details.reason: "append_only"`).',
  rotateBackupAccount:
    'Replaces the KDF parameters and the wrapped master key in one step (`rotated: true`). Backups stay readable: only ' +
    'the master key is re-wrapped. Without a vault: `409 vault_not_initialized`. With `If-Match` (the `ETag` of ' +
    '`GET /api/backup-account`, or `*`) the rotate is conditional: when the stored material is no longer the one ' +
    'named, `409 vault_changed` (`details.currentEtag`) and nothing changes; without `If-Match` it is unconditional. ' +
    'When the account has a deletion grace, the replaced envelope is kept that many days (header ' +
    '`X-Coffer-Vault-History-Days`) and the owner can restore it from the console. Needs `backups:write`, and a key that ' +
    'is not append-only (`403` with `details.reason: "append_only"`).',
  resetBackupAccount:
    'Deletes the vault material. With visible backups and `deleteBackups` not `true`: `409 vault_not_empty`. The plan ' +
    'and the cadence clock survive a reset. With a deletion grace, the deleted backups are `DELETING` and restorable for ' +
    'the grace, and the removed envelope is kept as long. Needs `backups:write`, and a key that is not append-only (`403` ' +
    'with `details.reason: "append_only"`).',
  listBackups:
    'Every visible backup (any status but `DELETING` and `DELETED`), newest first; expired backups are pruned before ' +
    'the list is built. Needs `backups:read`.',
  createBackup:
    'Opens a `PENDING_UPLOAD` slot for the upload window and says how to upload into it. Refused with ' +
    '`409 vault_not_initialized`, `409 upload_in_progress` (one slot at a time), then `429 backup_cadence_exceeded` ' +
    "while the plan's interval since the newest READY backup has not passed. Needs `backups:write`.",
  uploadBackup:
    'Direct (`application/octet-stream`, `?backupId=`): streams the ciphertext into the slot, which becomes ' +
    '`UPLOADED`; over the archive limit it is `413`. blobhost-client (`application/json`): the Vercel Blob ' +
    "client-upload handshake (docs/upload-protocols.md). Needs `backups:write`, except for the blob host's signed callback.",
  getBackup: 'One visible backup with its wrapped data key and sealed metadata. Needs `backups:read`.',
  deleteBackup:
    'Removes the ciphertext and answers once it is gone (`status: "DELETED"`); the record stays as a `DELETED` tombstone. ' +
    'When the account has a deletion grace and the backup is `READY`, it answers `status: "DELETING"`, `deletedAt: null`: ' +
    'the backup is hidden at once (404, not listed), its ciphertext is kept until the grace ends, and the owner can ' +
    'restore it until then. Deleting does not move the cadence clock back. Needs `backups:write`, and a key that is not ' +
    'append-only (`403` with `details.reason: "append_only"`, checked before the id is looked at).',
  getBackupContent:
    'The ciphertext of a `READY` backup (`404 backup_content_unavailable` in any other state), with an ETag. One ' +
    '`bytes=` range gives `206` with `Content-Range` (`If-Range` is compared with the ETag); any other range is ' +
    'ignored and answered `200` with the whole body. Needs `backups:restore`.',
  finalizeBackup:
    'Only from `UPLOADED` (else `409 invalid_backup_state`), and `ciphertextSizeBytes` must equal the stored size ' +
    "(else `409 ciphertext_size_mismatch`). `expiresAt` becomes now plus the plan's retention. Needs `backups:write`.",
};

/** A frame's `data:` line: one line of JSON. */
const jsonData = (schema: TSchema) => Type.String({ contentMediaType: 'application/json', contentSchema: schema });
const frame = (event: string, data: TSchema, description: string) =>
  Type.Object(
    { id: Type.String({ description: 'A counter per stream.' }), event: Type.Literal(event), data: jsonData(data) },
    { description, additionalProperties: false },
  );

/**
 * The text/event-stream body as OpenAPI 3.2 reads `schema` on a sequential media type: the whole stream as an array
 * of events, each event an object of its SSE fields (docs/api-rules.md#events).
 */
const BACKUP_EVENT_STREAM = Type.Array(
  Type.Union([
    Type.Object({ retry: Type.Literal(2000) }, { description: 'The first event: reconnect after 2 s.', additionalProperties: false }),
    frame(
      'backup.status',
      Type.Ref(BackupStatusEvent),
      'The backup now: sent at once, on every status change and at least every `COFFER_SSE_INTERVAL`.',
    ),
    frame('backup.stream.closed', BackupStreamClosed, 'The last event after a terminal status, the stream timeout or a shutdown.'),
    frame(
      'backup.stream.error',
      BackupStreamError,
      'The last event after an internal failure, or the only one (`too_many_streams`) over the open-stream caps.',
    ),
  ]),
  {
    description:
      'Server-Sent Events. Each `backup.status` event carries a BackupStatusEvent; the stream ends with ' +
      '`backup.stream.closed` or `backup.stream.error`.',
  },
);

type Components = { components?: { schemas?: Record<string, unknown> } };

/**
 * The document's AttestationRequest says what its `payload` holds: base64 of AttestationPayload's JSON (contentSchema),
 * which the server checks itself (src/domain/attestations.ts); the route's own schema is left as it is.
 */
export function documentAttestationPayload(document: Components): void {
  const schemas = document.components?.schemas;
  const request = schemas?.AttestationRequest as { properties: Record<string, object> } | undefined;
  if (!schemas || !request) return;
  schemas.AttestationRequest = {
    ...request,
    properties: {
      ...request.properties,
      payload: {
        ...request.properties.payload,
        description: 'Standard base64 of the payload: at most 4096 bytes of UTF-8 JSON, an AttestationPayload.',
        contentEncoding: 'base64',
        contentMediaType: 'application/json',
        contentSchema: { $ref: '#/components/schemas/AttestationPayload' },
      },
      mac: { ...request.properties.mac, description: 'Standard base64 of the 32-byte HMAC-SHA-256 of the payload bytes.' },
    },
  };
}

interface RouteSchema {
  operationId?: string;
  description?: string;
  response?: Record<string, { content?: Record<string, unknown> }>;
}

/** The @fastify/swagger `transform`: a documented copy of a route schema (the route keeps its own). */
export function documentRoute({ schema, url }: { schema: FastifySchema; url: string }): { schema: FastifySchema; url: string } {
  const route = schema as RouteSchema | undefined;
  if (!route?.operationId) return { schema, url };
  const documented: RouteSchema = { ...route, description: route.description ?? OPERATION_DESCRIPTIONS[route.operationId] };
  const ok = route.response?.[200];
  if (ok?.content?.['text/event-stream']) {
    documented.response = { ...route.response, 200: { ...ok, content: { 'text/event-stream': { schema: BACKUP_EVENT_STREAM } } } };
  }
  return { schema: documented as FastifySchema, url };
}
