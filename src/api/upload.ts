/** POST /api/backups/upload: the archive ciphertext, streamed to the blob store (CONTRACT §6). */
import { Type } from '@sinclair/typebox';
import type { onRequestAsyncHookHandler } from 'fastify';
import { AppError } from '../domain/errors.js';
import { mediaType } from '../server/bodies.js';
import { guardBodyRate } from '../server/slow-client.js';
import { negotiateUpload } from './blobhost.js';
import type { App, RouteContext } from './context.js';
import { errorResponses, json } from './responses.js';
import { ClientUploadResponse, DirectUploadResponse } from './schemas.js';

/**
 * Registered in a scope whose content-type parser leaves the body unread: the handler streams it itself,
 * so no body is ever buffered whole and the size limit holds for chunked bodies too.
 */
export function uploadRoutes(app: App, ctx: RouteContext): void {
  app.post(
    '/api/backups/upload',
    {
      schema: {
        operationId: 'uploadBackup',
        summary: 'Upload the encrypted archive (direct) or negotiate a client upload (blobhost-client)',
        tags: ['Backups'],
        querystring: Type.Object({
          backupId: Type.Optional(
            Type.String({ description: 'The slot to upload into; required for direct uploads.' }),
          ),
        }),
        response: {
          200: json(Type.Ref(ClientUploadResponse), 'Client-negotiation response (blobhost-client mode).'),
          201: json(Type.Ref(DirectUploadResponse), 'The archive is stored; the backup is UPLOADED.'),
          ...errorResponses(400, 401, 403, 409, 413, 415, 500),
        },
      },
      onRequest: uploadAuth(ctx),
    },
    async (request, reply) => {
      const type = mediaType(request.headers['content-type']);
      if (type === 'application/json' && ctx.blobHost) {
        return reply.code(200).send(await negotiateUpload(ctx.blobHost, request));
      }
      if (type === 'application/json') {
        throw new AppError(
          'unsupported_media_type',
          'This server uses direct uploads: send the ciphertext as application/octet-stream.',
          { uploadProtocol: ctx.config.uploadProtocol },
        );
      }
      if (type !== 'application/octet-stream') {
        throw new AppError('unsupported_media_type', 'Send the ciphertext as application/octet-stream.');
      }
      const { minUploadBytesPerSecond, uploadRateWindowMs } = ctx.config.limits;
      guardBodyRate(request.raw, minUploadBytesPerSecond, uploadRateWindowMs);
      const lengthHeader = request.headers['content-length'];
      const contentLength = lengthHeader === undefined ? undefined : Number(lengthHeader);
      const result = await ctx.backups.uploadDirect(
        request.principal.accountId,
        request.query.backupId,
        request.raw,
        contentLength,
      );
      ctx.metrics.uploadBytes.inc(result.size);
      return reply.code(201).send(result);
    },
  );
}

/**
 * `backups:write`, except for a `blob.upload-completed` callback in blobhost-client mode: it comes from a blob
 * host, not a user, and is authenticated by its `x-vercel-signature` instead (checked in the handler).
 */
function uploadAuth(ctx: RouteContext): onRequestAsyncHookHandler {
  const write = ctx.requireScope('backups:write');
  return async function authenticate(request, reply) {
    if (ctx.blobHost && request.headers['x-vercel-signature'] !== undefined) return;
    return write.call(this, request, reply);
  };
}

export const UPLOAD_REQUEST_BODY = {
  required: true,
  content: {
    'application/octet-stream': {
      schema: { type: 'string', contentMediaType: 'application/octet-stream', description: 'Direct mode: the ciphertext.' },
    },
    'application/json': {
      schema: { type: 'object', additionalProperties: true, description: 'blobhost-client mode: a negotiation object.' },
    },
  },
};
