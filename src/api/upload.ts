/** POST /api/backups/upload: the archive ciphertext, streamed to the blob store (docs/api-rules.md#upload). */
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../domain/errors.js';
import { mediaType } from '../http/bodies.js';
import { guardBodyRate } from '../http/slow-client.js';
import { isPresignedBody, negotiateUpload, readText } from './blobhost.js';
import { JSON_BODY_LIMIT } from '../http/bodies.js';
import type { AppPlugin } from '../http/fastify.js';
import type { RouteContext } from './context.js';
import { errorResponses, json } from './responses.js';
import { ClientUploadResponse, DirectUploadResponse } from '../contract/schemas.js';

/**
 * Registered in a scope whose content-type parser leaves the body unread: the handler streams it itself,
 * so no body is ever buffered whole and the size limit holds for chunked bodies too.
 */
export const uploadRoutes: AppPlugin<RouteContext> = async (app, ctx) => {
  const write = ctx.requireScope('backups:write');
  app.post(
    '/api/backups/upload',
    {
      schema: {
        operationId: 'uploadBackup',
        summary: 'Upload the encrypted archive (direct) or negotiate a client upload (blobhost-client, s3-presigned)',
        tags: ['Backups'],
        querystring: Type.Object({
          backupId: Type.Optional(Type.String({ description: 'The slot to upload into; required for direct uploads.' })),
        }),
        response: {
          200: json(Type.Ref(ClientUploadResponse), 'Client-negotiation response (blobhost-client mode, or s3-presigned).'),
          201: json(Type.Ref(DirectUploadResponse), 'The archive is stored; the backup is UPLOADED.'),
          ...errorResponses(400, 401, 403, 409, 413, 415, 500),
        },
      },
      // `backups:write`, except for what may be a blob host's callback: negotiateUpload checks its signature.
      onRequest: async function authenticate(request, reply) {
        if (!mayBeCallback(ctx, request)) return write.call(this, request, reply);
      },
    },
    async function upload(request, reply) {
      const { minUploadBytesPerSecond, uploadRateWindowMs } = ctx.config.limits;
      guardBodyRate(request.raw, minUploadBytesPerSecond, uploadRateWindowMs);
      const type = mediaType(request.headers['content-type']);
      const presigned = (body: { type?: unknown }) => negotiatePresigned(ctx, request.principal.accountId, body);
      if (type === 'application/json' && ctx.uploadHandshake) {
        return reply
          .code(200)
          .send(await negotiateUpload(ctx.uploadHandshake, request, async () => write.call(this, request, reply), presigned));
      }
      if (type === 'application/json') {
        // Direct mode: a JSON body is only ever an s3-presigned negotiation.
        const directOnly = () =>
          new AppError('unsupported_media_type', 'This server uses direct uploads: send the ciphertext as application/octet-stream.', {
            uploadProtocol: ctx.config.uploadProtocol,
          });
        const body = await readNegotiation(request, directOnly);
        if (body === undefined) throw directOnly();
        return reply.code(200).send(await presigned(body));
      }
      if (type !== 'application/octet-stream') {
        throw new AppError('unsupported_media_type', 'Send the ciphertext as application/octet-stream.');
      }
      const lengthHeader = request.headers['content-length'];
      const contentLength = lengthHeader === undefined ? undefined : Number(lengthHeader);
      const result = await ctx.backups.uploadDirect(request.principal.accountId, request.query.backupId, request.raw, contentLength);
      ctx.metrics.uploadBytes.inc(result.size);
      return reply.code(201).send(result);
    },
  );
};

/** The `s3-presigned.*` negotiation (docs/upload-protocols.md#s3-presigned); 400 on `type` where it is not offered. */
function negotiatePresigned(ctx: RouteContext, accountId: string, body: { type?: unknown }): Promise<Record<string, unknown>> {
  if (!ctx.presignedUploads) {
    throw AppError.validation([{ path: 'type', message: 'this server does not offer s3-presigned uploads (COFFER_S3_PRESIGNED)' }]);
  }
  return ctx.presignedUploads.negotiate(accountId, body);
}

/** A JSON body that is an s3-presigned negotiation, or undefined; a body too large to be one fails with `otherwise()`. */
async function readNegotiation(request: FastifyRequest, otherwise: () => Error): Promise<{ type?: unknown } | undefined> {
  const text = await readText(request.raw, JSON_BODY_LIMIT, otherwise);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  return isPresignedBody(body) ? body : undefined;
}

/**
 * In blobhost-client mode a JSON body with `x-vercel-signature` may be a `blob.upload-completed` callback from a
 * blob host, not a user, authenticated by that signature over the body. Only such a request may skip the key.
 */
function mayBeCallback(ctx: RouteContext, request: FastifyRequest): boolean {
  return (
    ctx.uploadHandshake !== undefined &&
    request.headers['x-vercel-signature'] !== undefined &&
    mediaType(request.headers['content-type']) === 'application/json'
  );
}

export const UPLOAD_REQUEST_BODY = {
  required: true,
  content: {
    'application/octet-stream': {
      schema: { type: 'string', contentMediaType: 'application/octet-stream', description: 'Direct mode: the ciphertext.' },
    },
    'application/json': {
      schema: {
        type: 'object',
        additionalProperties: true,
        description: 'A negotiation object: blobhost-client mode, or s3-presigned where offered.',
      },
    },
  },
};
