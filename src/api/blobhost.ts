/**
 * The `blobhost-client` protocol over HTTP (docs/upload-protocols.md):
 * - the blob-host endpoints under /blob that the stock `@vercel/blob/client` calls when
 *   `VERCEL_BLOB_API_URL=<public URL>/blob` (client-token authenticated, errors in the blob API's shape);
 * - the JSON branch of POST /api/backups/upload (handshake and signed completion callback).
 * Only registered when COFFER_UPLOAD_PROTOCOL=blobhost-client. Not part of the /api surface, so the /blob
 * routes are left out of /openapi.json.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import type { ConnectionLimits } from '../config.js';
import { AppError } from '../domain/errors.js';
import { BlobApiError, type BlobHostService } from '../services/blob-host.js';
import { checkBody, JsonObject, type UploadHandshake } from '../services/upload-handshake.js';
import { JSON_BODY_LIMIT, jsonTooLarge, streamedBodies } from '../http/bodies.js';
import { logUnhandled } from '../http/errors.js';
import { discardUnreadBody, guardBodyRate } from '../http/slow-client.js';
import type { AppPlugin } from '../http/fastify.js';

/** Reads a whole (small) body as text; more than `limit` bytes fails with `tooLarge()`. */
export async function readText(body: Readable, limit: number, tooLarge: () => Error): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      body.resume(); // drain the rest so the connection stays usable for the answer
      throw tooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function declaredLength(request: FastifyRequest): number | undefined {
  const text = header(request, 'content-length') ?? header(request, 'x-content-length');
  if (text === undefined || !/^\d+$/.test(text)) return undefined;
  return Number(text);
}

function pathnameOf(request: FastifyRequest): string | undefined {
  const { pathname } = request.query as { pathname?: string | string[] };
  return Array.isArray(pathname) ? undefined : pathname;
}

const MAX_COMPLETE_BODY = 1024 * 1024;

/** The blob-host endpoints, a scope of their own (they read their bodies themselves). */
export const blobHostRoutes: AppPlugin<{ host: BlobHostService; limits: ConnectionLimits }> = async (app, { host, limits }) => {
  streamedBodies(app);
  // Bodies that trickle in too slowly are cut off, as for direct uploads.
  app.addHook('onRequest', async (request) => {
    guardBodyRate(request.raw, limits.minUploadBytesPerSecond, limits.uploadRateWindowMs);
  });
  app.setErrorHandler((error, request, reply) => {
    discardUnreadBody(request.raw);
    if (error instanceof BlobApiError) {
      return reply
        .code(error.status)
        .send({ error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) } });
    }
    const code = (error as { code?: string }).code;
    if (typeof code === 'string' && code.startsWith('FST_ERR_CTP')) {
      return reply.code(400).send({ error: { code: 'bad_request', message: 'The request body is not acceptable.' } });
    }
    logUnhandled(request.log, error, request.raw.destroyed);
    // An unknown code makes the client retry, which suits a passing storage failure.
    return reply.code(500).send({ error: { code: 'internal_server_error', message: 'Something went wrong on our side.' } });
  });

  const authorize = (request: FastifyRequest, completing?: string) =>
    host.authorize(header(request, 'authorization'), pathnameOf(request), header(request, 'x-content-type'), completing);

  app.put('/blob/', { schema: { hide: true } }, async (request: FastifyRequest, reply: FastifyReply) => {
    const { token, backup } = await authorize(request);
    const declared = declaredLength(request);
    host.checkDeclaredLength(token, declared);
    return reply.code(200).send(await host.putSingle(token, backup, request.raw, declared));
  });

  app.post('/blob/mpu', { schema: { hide: true } }, async (request: FastifyRequest, reply: FastifyReply) => {
    const action = header(request, 'x-mpu-action');
    const ids = {
      key: safeDecode(header(request, 'x-mpu-key')),
      uploadId: header(request, 'x-mpu-upload-id'),
    };
    const { token, backup } = await authorize(request, action === 'complete' ? ids.key : undefined);
    switch (action) {
      case 'create':
        request.raw.resume();
        return reply.code(200).send(await host.createMultipart(backup));
      case 'upload': {
        const exact = header(request, 'content-length');
        const part = await host.uploadPart(
          token,
          backup,
          { ...ids, partNumber: header(request, 'x-mpu-part-number'), contentLength: exact === undefined ? undefined : Number(exact) },
          request.raw,
        );
        return reply.code(200).send(part);
      }
      case 'complete': {
        const text = await readText(
          request.raw,
          MAX_COMPLETE_BODY,
          () => new BlobApiError(400, 'bad_request', 'The part list is too long.'),
        );
        let parts: unknown;
        try {
          parts = JSON.parse(text);
        } catch {
          throw new BlobApiError(400, 'bad_request', 'The body must be a JSON array of {partNumber, etag}.');
        }
        return reply.code(200).send(await host.completeMultipart(token, backup, ids, parts));
      }
      default:
        request.raw.resume();
        throw new BlobApiError(400, 'bad_request', 'x-mpu-action must be create, upload or complete.');
    }
  });
};

function safeDecode(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

/** A JSON object whose `type` names an s3-presigned negotiation step. */
export function isPresignedBody(body: unknown): body is { type: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const { type } = body as { type?: unknown };
  return typeof type === 'string' && type.startsWith('s3-presigned.');
}

/**
 * The JSON branch of POST /api/backups/upload in blobhost-client mode. Returns the negotiation response
 * (200). `blob.generate-client-token` needs the caller's API key (checked before); a request carrying
 * `x-vercel-signature` is a `blob.upload-completed` callback authenticated by that signature instead, and
 * reaches here without a key check: when its body cannot be read whole, there is no signature to check, so
 * `authenticate` (the key check) runs before that is answered (401 first).
 */
export async function negotiateUpload(
  handshake: UploadHandshake,
  request: FastifyRequest,
  authenticate: () => Promise<unknown>,
  /** An `s3-presigned.*` body (of an authenticated caller) goes there. */
  presigned?: (body: { type?: unknown }) => Promise<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  const signature = header(request, 'x-vercel-signature');
  let text: string;
  try {
    text = await readText(request.raw, JSON_BODY_LIMIT, jsonTooLarge);
  } catch (error) {
    if (signature !== undefined) await authenticate();
    throw error;
  }
  let body: unknown;
  let parsed = true;
  try {
    body = JSON.parse(text);
  } catch {
    parsed = false;
  }
  // A callback authenticates with its signature over the body: check that before the body itself (401 before 400).
  if (signature !== undefined && !handshake.isSigned(text, parsed ? body : undefined, signature)) {
    throw new AppError('authentication_required', 'The x-vercel-signature does not match the body.');
  }
  if (!parsed) throw new AppError('invalid_json', 'The request body is not valid JSON.');
  checkBody(JsonObject, body);
  if (signature !== undefined) return handshake.uploadCompleted(body);
  if (presigned && isPresignedBody(body)) return presigned(body);
  const { type } = body as { type?: unknown };
  if (type === 'blob.generate-client-token') {
    const { backupId } = request.query as { backupId?: string };
    return handshake.generateClientToken(request.principal.accountId, body, backupId);
  }
  if (type === 'blob.upload-completed') {
    throw AppError.validation([{ path: 'type', message: 'blob.upload-completed must be signed (x-vercel-signature)' }]);
  }
  throw AppError.validation([{ path: 'type', message: 'must be blob.generate-client-token (or a signed blob.upload-completed)' }]);
}
