/**
 * The handshake of the `blobhost-client` upload protocol (docs/upload-protocols.md), on POST /api/backups/upload:
 * part of the Coffer API, so its errors are AppErrors (the API's error envelope).
 *
 * - `blob.generate-client-token` (API-key authenticated) for the slot's `blobPath` → a client token signed with
 *   Coffer's read-write token, bound to that pathname, `application/octet-stream`, the archive size limit and the
 *   slot's expiry. The blob host (./blob-host.ts) checks it on every upload request.
 * - `blob.upload-completed` callbacks signed with the read-write token (external blob hosts).
 */
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { BlobStore } from '../blobs/blob-store.js';
import type { Clock } from '../domain/clock.js';
import { AppError, type ValidationIssue } from '../domain/errors.js';
import { sameSecret } from '../lib/compare.js';
import type { BackupService } from './backups.js';
import { ALLOWED_CONTENT_TYPE, type ClientTokenPayload, type ReadWriteToken, slotOf } from './blob-host.js';

const MAX_TOKEN_LIFETIME_MS = 3_600_000;

// ---- the protocol's bodies, checked with Value.Check. A node names the validation issue its failure reports.

const issue = (path: string, message: string): { issue: ValidationIssue } => ({ issue: { path, message } });

/** A JSON object (not an array): the JSON bodies of POST /api/backups/upload. */
export const JsonObject = Type.Object({}, issue('(body)', 'must be a JSON object'));

/** What Coffer reads of a `blob.generate-client-token` body. */
const ClientTokenRequest = Type.Object({
  payload: Type.Object(
    {
      pathname: Type.String(issue('payload.pathname', 'must be a string')),
      clientPayload: Type.Optional(Type.Union([Type.String(), Type.Null()], issue('payload.clientPayload', 'must be a string or null'))),
      multipart: Type.Optional(Type.Boolean(issue('payload.multipart', 'must be a boolean'))),
    },
    issue('payload', 'must be an object'),
  ),
});

/** A signed request is a `blob.upload-completed` callback (checked before its payload). */
const UploadCompletedType = Type.Object({
  type: Type.Literal('blob.upload-completed', issue('type', 'a signed request must be blob.upload-completed')),
});

const blobPathname = issue('payload.blob.pathname', 'must be a string');
/** What Coffer reads of a `blob.upload-completed` body. */
const UploadCompleted = Type.Object({
  payload: Type.Object({ blob: Type.Object({ pathname: Type.String(blobPathname) }, blobPathname) }, blobPathname),
});

/** Refuses `value` unless it has the shape of `schema`, with the issue of the first node it fails. */
export function checkBody<T extends TSchema>(schema: T, value: unknown): asserts value is Static<T> {
  if (Value.Check(schema, value)) return;
  const failed = Value.Errors(schema, value).First()?.schema as { issue?: ValidationIssue } | undefined;
  throw AppError.validation([failed?.issue ?? { path: '(body)', message: 'does not have the expected shape' }]);
}

export interface HandshakeOptions {
  readonly publicUrl: string;
  readonly maxArchiveBytes: number;
}

export class UploadHandshake {
  constructor(
    private readonly blobs: BlobStore,
    private readonly backups: BackupService,
    private readonly clock: Clock,
    private readonly options: HandshakeOptions,
    private readonly token: ReadWriteToken,
  ) {}

  /** `blob.generate-client-token` from an authenticated caller: a token for one of their PENDING_UPLOAD slots. */
  async generateClientToken(accountId: string, body: unknown, backupId: string | undefined) {
    checkBody(ClientTokenRequest, body);
    const { pathname, clientPayload } = body.payload;
    const slot = slotOf(pathname);
    const backup = slot?.accountId === accountId ? await this.backups.findVisible(accountId, slot.backupId) : undefined;
    if (!backup || backup.blobPath !== pathname) {
      throw AppError.validation([
        { path: 'payload.pathname', message: 'must be the blobPath of one of your backup slots (from POST /api/backups)' },
      ]);
    }
    if (backupId !== undefined && backupId !== backup.id) {
      throw AppError.validation([{ path: 'backupId', message: 'names a different backup than payload.pathname' }]);
    }
    if (backup.status !== 'PENDING_UPLOAD') {
      throw new AppError('invalid_backup_state', `The backup is ${backup.status}.`, { status: backup.status });
    }
    const token: ClientTokenPayload = {
      pathname,
      allowedContentTypes: [ALLOWED_CONTENT_TYPE],
      maximumSizeInBytes: this.options.maxArchiveBytes,
      validUntil: Math.min(backup.expiresAt, this.clock.now() + MAX_TOKEN_LIFETIME_MS),
      addRandomSuffix: false,
      allowOverwrite: false,
      onUploadCompleted: { callbackUrl: `${this.options.publicUrl}/api/backups/upload`, tokenPayload: clientPayload ?? null },
    };
    return { type: 'blob.generate-client-token' as const, clientToken: this.token.signClientToken(token) };
  }

  /** Whether `signature` is the HMAC of the body as sent, or of its compact JSON form (`body`, when it parsed). */
  isSigned(rawBody: string, body: unknown, signature: string): boolean {
    const given = signature.toLowerCase();
    if (sameSecret(given, this.token.sign(rawBody))) return true;
    if (body === undefined) return false;
    let compact: string;
    try {
      compact = JSON.stringify(body);
    } catch {
      return false; // nested too deeply to serialize again: it was not signed in compact form either
    }
    return sameSecret(given, this.token.sign(compact));
  }

  /**
   * `blob.upload-completed`, signed by a blob host holding the read-write token (`x-vercel-signature`: hex
   * HMAC-SHA256 of the JSON body). With Coffer as the blob host the slot is already UPLOADED (answered ok);
   * an external host that stored the bytes at the slot's pathname in the shared BlobStore completes it here.
   * The caller has checked the signature (isSigned).
   */
  async uploadCompleted(body: unknown) {
    checkBody(UploadCompletedType, body);
    checkBody(UploadCompleted, body);
    const { pathname } = body.payload.blob;
    const slot = slotOf(pathname);
    const backup = slot ? await this.backups.findVisible(slot.accountId, slot.backupId) : undefined;
    if (!backup) {
      throw AppError.validation([{ path: 'payload.blob.pathname', message: 'does not name a backup slot' }]);
    }
    const ok = { type: 'blob.upload-completed' as const, response: 'ok' as const };
    if (backup.status === 'UPLOADED' || backup.status === 'READY') return ok;
    if (backup.status !== 'PENDING_UPLOAD') {
      throw new AppError('invalid_backup_state', `The backup is ${backup.status}.`, { status: backup.status });
    }
    const stored = await this.blobs.stat(pathname);
    if (!stored) {
      throw AppError.validation([{ path: 'payload.blob.pathname', message: 'no ciphertext is stored at this pathname' }]);
    }
    if (stored.size > this.options.maxArchiveBytes) {
      await this.blobs.delete(pathname);
      throw new AppError('payload_too_large', `The encrypted archive is larger than ${this.options.maxArchiveBytes} bytes.`, {
        maxBytes: this.options.maxArchiveBytes,
      });
    }
    await this.backups.recordUpload(backup, pathname, stored);
    return ok;
  }
}
