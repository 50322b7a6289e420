/** /api/backups and /api/backups/{id}: slots, records, finalize, delete (docs/api-rules.md#states to #download). */
import { Type } from '@sinclair/typebox';
import { backupEtag } from '../domain/backups.js';
import { rateLimitPolicy } from '../domain/plans.js';
import { sendContent } from '../http/content-response.js';
import type { onRequestAsyncHookHandler } from 'fastify';
import type { App, AppPlugin } from '../http/fastify.js';
import { type RouteContext, loadBackup, loadReadableBackup } from './context.js';
import { CREATE_CONFLICT, errorResponses, json } from './responses.js';
import {
  BackupDetail,
  BackupFinalizeRequest,
  type BackupFinalizeBody,
  BackupIdParams,
  BackupList,
  CreateBackupResponse,
  DeleteBackupResponse,
} from '../contract/schemas.js';
import { AppError } from '../domain/errors.js';
import { iso } from '../domain/time.js';
import type { FinalizeInput } from '../domain/vault-input.js';
import { detailBody, outcomeBody } from '../contract/views.js';
import { serializedList } from './serialized-list.js';

const tags = ['Backups'];

const RANGE_HEADERS = {
  'Content-Length': { type: 'integer', minimum: 0 },
  'Content-Disposition': { type: 'string', description: 'attachment; filename="backup-<id>.bin"' },
  ETag: { type: 'string' },
  'Accept-Ranges': { type: 'string', const: 'bytes' },
};
/** The Coffer-Extensions token of GET /api/backups/{id} when content-url is offered. */
const EXTENSION_PRESIGNED_DOWNLOAD = 's3-presigned-download';
/** Extension s3-presigned-download: the answer of GET /api/backups/{id}/content-url. */
const ContentUrl = Type.Object(
  {
    url: Type.String({ description: 'GET it (a Range header is allowed) before expiresAt; never log it.' }),
    expiresAt: Type.String({ format: 'date-time' }),
    size: Type.Integer({ minimum: 0, description: 'The ciphertext size in bytes (ciphertextSizeBytes).' }),
  },
  { additionalProperties: false },
);
const BINARY = { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } };

/** The onRequest steps of the routes without a request body. */
interface Guards {
  read: onRequestAsyncHookHandler;
  write: onRequestAsyncHookHandler;
  restore: onRequestAsyncHookHandler;
  /** The caller's own visible backup. */
  byId: onRequestAsyncHookHandler;
  /** Reading also reaches the caller's host accounts' backups (an owner credential); writing never does. */
  readableById: onRequestAsyncHookHandler;
}

/** Routes without a request body: the collection, one record, its content and its events, in this order. */
export const backupReadRoutes: AppPlugin<RouteContext> = async (app, ctx) => {
  const guards: Guards = {
    read: ctx.requireScope('backups:read'),
    write: ctx.requireScope('backups:write'),
    restore: ctx.requireScope('backups:restore'),
    byId: loadBackup(ctx),
    readableById: loadReadableBackup(ctx),
  };
  collectionRoutes(app, ctx, guards);
  recordRoutes(app, ctx, guards);
  contentRoutes(app, ctx, guards);
};

/** How the client uploads into a new slot, by the server's upload protocol. */
function uploadInstruction(config: RouteContext['config'], backupId: string) {
  return config.uploadProtocol === 'direct'
    ? {
        method: 'POST' as const,
        protocol: 'direct' as const,
        uploadUrl: `${config.publicUrl}/api/backups/upload?backupId=${backupId}`,
        contentType: 'application/octet-stream' as const,
      }
    : {
        method: 'POST' as const,
        protocol: 'blobhost-client' as const,
        handleUploadUrl: `${config.publicUrl}/api/backups/upload`,
        contentType: 'application/octet-stream' as const,
      };
}

/** GET /api/backups (list) and POST /api/backups (create). */
function collectionRoutes(app: App, ctx: RouteContext, { read, write }: Guards): void {
  app.get(
    '/api/backups',
    {
      schema: {
        operationId: 'listBackups',
        summary: 'List backups, newest first',
        tags,
        response: { 200: json(Type.Ref(BackupList), 'Visible backups, newest first.'), ...errorResponses(401, 403, 500) },
      },
      onRequest: read,
    },
    async (request, reply) => {
      const records = await ctx.backups.list(request.principal.accountId);
      const serialize = reply.getSerializationFunction('200', 'application/json');
      if (!serialize) throw new Error('GET /api/backups has no response serializer');
      void reply.type('application/json; charset=utf-8');
      return serializedList(records, serialize);
    },
  );

  app.post(
    '/api/backups',
    {
      schema: {
        operationId: 'createBackup',
        summary: 'Open an upload slot for a new backup',
        tags,
        response: {
          201: json(Type.Ref(CreateBackupResponse), 'A pending record and its upload instructions.', {
            'X-RateLimit-Policy': { type: 'string', description: 'The plan cadence, e.g. 1;w=86400;comment="free plan: 1 backup per day"' },
            'Coffer-Max-Archive-Bytes': {
              type: 'integer',
              minimum: 1,
              description:
                'The largest encrypted archive this server accepts, in bytes (its COFFER_MAX_ARCHIVE_BYTES): ' +
                'a larger upload is refused with 413 payload_too_large.',
            },
            'Coffer-Extensions': {
              type: 'string',
              description:
                'Extensions of the upload protocol this server offers, comma-separated: `s3-presigned-upload` ' +
                '(the client may upload straight to the object store, docs/upload-protocols.md#s3-presigned).',
            },
          }),
          ...errorResponses(401, 403, 409, 429, 500),
          409: { ...errorResponses(409)[409], description: CREATE_CONFLICT },
        },
      },
      onRequest: write,
    },
    async (request, reply) => {
      const { backup, plan } = await ctx.backups.create(request.principal.accountId);
      const upload = uploadInstruction(ctx.config, backup.id);
      reply
        .code(201)
        .header('x-ratelimit-policy', rateLimitPolicy(plan))
        .header('coffer-max-archive-bytes', String(ctx.config.maxArchiveBytes));
      if (ctx.presignedUploads) reply.header('coffer-extensions', 's3-presigned-upload');
      return {
        backupId: backup.id,
        blobPath: backup.blobPath,
        status: backup.status,
        expiresAt: iso(backup.expiresAt),
        upload,
      };
    },
  );
}

/** GET and DELETE /api/backups/{id}. */
function recordRoutes(app: App, ctx: RouteContext, { read, write, byId, readableById }: Guards): void {
  app.get(
    '/api/backups/:id',
    {
      schema: {
        operationId: 'getBackup',
        summary: 'Read one backup',
        tags,
        params: BackupIdParams,
        response: {
          200: json(Type.Ref(BackupDetail), 'The backup.', {
            'Coffer-Extensions': {
              type: 'string',
              description:
                'Extensions this server offers for the backup, comma-separated: `s3-presigned-download` when ' +
                '`GET /api/backups/{id}/content-url` is available (docs/api-rules.md#s3-presigned-download).',
            },
          }),
          ...errorResponses(401, 403, 404, 500),
        },
      },
      onRequest: [read, readableById],
    },
    async (request, reply) => {
      if (ctx.backups.offersPresignedDownload) reply.header('coffer-extensions', EXTENSION_PRESIGNED_DOWNLOAD);
      return detailBody(request.backup);
    },
  );

  app.delete(
    '/api/backups/:id',
    {
      schema: {
        operationId: 'deleteBackup',
        summary: 'Delete a backup and its ciphertext',
        tags,
        params: BackupIdParams,
        response: { 200: json(Type.Ref(DeleteBackupResponse), 'The deleted record.'), ...errorResponses(401, 403, 404, 500) },
      },
      onRequest: [write, ctx.refuseAppendOnly('backup.delete'), byId],
    },
    async (request) => {
      const deleted = await ctx.backups.delete(request.principal.accountId, request.backup.id);
      await ctx.audit(request, 'backup.delete', { target: deleted.id });
      return outcomeBody(deleted);
    },
  );
}

/** GET /api/backups/{id}/content (the ciphertext) and /events (its status as Server-Sent Events). */
function contentRoutes(app: App, ctx: RouteContext, { read, restore, readableById }: Guards): void {
  /** Before any other check: a server that does not offer presigned downloads answers as for an unknown route. */
  const offeredOnly: onRequestAsyncHookHandler = async (request) => {
    if (!ctx.backups.offersPresignedDownload) {
      throw new AppError('not_found', `No route ${request.method} ${request.url.split('?')[0]!}.`);
    }
  };
  app.get(
    '/api/backups/:id/content',
    {
      schema: {
        operationId: 'getBackupContent',
        summary: 'Download the ciphertext (a single Range gives 206, so a restore can resume)',
        tags,
        params: BackupIdParams,
        response: {
          200: { description: 'The whole ciphertext.', headers: RANGE_HEADERS, content: BINARY },
          206: {
            description: 'Extension: the requested byte range.',
            headers: { ...RANGE_HEADERS, 'Content-Range': { type: 'string' } },
            content: BINARY,
          },
          ...errorResponses(401, 403, 404, 500),
        },
      },
      onRequest: [restore, readableById],
    },
    async (request, reply) => {
      const { id, ciphertextSizeBytes } = request.backup;
      const size = ciphertextSizeBytes ?? 0;
      return sendContent(
        request,
        reply,
        {
          size,
          etag: backupEtag(id, size),
          filename: `backup-${id}.bin`,
          open: async (range) => (await ctx.backups.openContent(request.backup.accountId, id, range)).stream,
          ...(ctx.config.blobStore === 's3'
            ? { locateInStore: async () => (await ctx.backups.locateContentInStore(request.backup)).pathAndQuery }
            : { locate: async () => (await ctx.backups.locateContent(request.backup.accountId, id)).blobKey }),
        },
        // Only nginx acts on an X-Accel-Redirect: a request that did not come through a trusted proxy gets the bytes.
        ctx.fromTrustedProxy(request) ? ctx.config.accelRedirect : null,
      );
    },
  );

  // Extension s3-presigned-download (docs/api-rules.md#s3-presigned-download): the same checks as the content, then a
  // short-lived URL of the object in the store instead of the bytes. Not offered: answered as an unknown route.
  app.get(
    '/api/backups/:id/content-url',
    {
      schema: {
        operationId: 'getBackupContentUrl',
        summary: 'A short-lived URL of the ciphertext in the object store (extension s3-presigned-download)',
        description:
          'Extension, offered when `GET /api/backups/{id}` carries `Coffer-Extensions: s3-presigned-download` (S3 store ' +
          'with `COFFER_S3_PRESIGNED=on`); otherwise `404 not_found` as for an unknown route, before any other check. The ' +
          'same checks and answers as `getBackupContent` (a `READY` backup the caller may read, else `404`), then instead ' +
          'of the bytes a GET presigned for the object store (`COFFER_S3_PUBLIC_ENDPOINT`), valid until `expiresAt` ' +
          '(`COFFER_S3_URL_LIFETIME`): the client fetches it (a `Range` header is allowed), checks `size`, decrypts as ' +
          'usual. Needs `backups:restore`.',
        tags,
        params: BackupIdParams,
        response: {
          200: json(ContentUrl, 'A presigned GET of the ciphertext; the URL is a secret until expiresAt.', {
            'Cache-Control': { type: 'string', const: 'no-store' },
          }),
          ...errorResponses(401, 403, 404, 500),
        },
      },
      onRequest: [offeredOnly, restore, readableById],
    },
    async (request, reply) => {
      const { request: get, size } = await ctx.backups.presignContent(request.backup);
      reply.header('cache-control', 'no-store');
      return { url: get.url, expiresAt: iso(get.expiresAt), size };
    },
  );

  app.get(
    '/api/backups/:id/events',
    {
      schema: {
        operationId: 'streamBackupEvents',
        summary: 'Follow the status of a backup as Server-Sent Events',
        description:
          'Frames `backup.status` (BackupStatusEvent) at once, on every change and at least every 2 s; ' +
          '`backup.stream.closed` after a terminal status, a timeout or a shutdown; `backup.stream.error` on an internal failure, ' +
          'or as the only frame (code `too_many_streams`) when the account or client address already has too many streams open.',
        tags,
        params: BackupIdParams,
        response: {
          200: {
            description: 'An event stream.',
            headers: {
              'Cache-Control': { type: 'string', const: 'no-store, no-transform' },
            },
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
          ...errorResponses(401, 403, 404, 500),
        },
      },
      onRequest: [read, readableById],
    },
    async (request, reply) => {
      reply.hijack();
      ctx.streams.open(reply.raw, request.backup, { accountId: request.principal.accountId, address: request.ip });
    },
  );
}

/** A finalize body in the backup service's terms. */
function finalizeInputOf(body: BackupFinalizeBody): FinalizeInput {
  return {
    wrappedDek: body.wrappedDek,
    wrappedDekNonce: body.wrappedDekNonce,
    encryptedMetadata: body.encryptedMetadata,
    encryptedMetadataNonce: body.encryptedMetadataNonce,
    ciphertextSizeBytes: body.ciphertextSizeBytes,
    plaintextSizeBytes: body.plaintextSizeBytes,
    clientVersion: body.clientVersion ?? null,
    hostappVersion: body.hostappVersion ?? null,
  };
}

/** Routes with a JSON request body. */
export const backupWriteRoutes: AppPlugin<RouteContext> = async (app, ctx) => {
  app.post<{ Body: BackupFinalizeBody }>(
    '/api/backups/:id/finalize',
    {
      schema: {
        operationId: 'finalizeBackup',
        summary: 'Store the wrapped data key, sealed metadata and sizes; the backup becomes READY',
        tags,
        params: BackupIdParams,
        body: Type.Ref(BackupFinalizeRequest),
        response: { 200: json(Type.Ref(BackupDetail), 'The READY backup.'), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
      onRequest: [ctx.requireScope('backups:write'), loadBackup(ctx)],
    },
    async (request) => detailBody(await ctx.backups.finalize(request.backup, finalizeInputOf(request.body))),
  );
};
