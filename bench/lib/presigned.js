/* global Buffer, URL */
/**
 * The presigned S3 upload as a client drives it (issue 38, wire design: the SPEC's client-negotiation body on
 * POST /api/backups/upload with `s3-presigned.*` types), in raw HTTP, for the benchmarks; and the baseline beside it,
 * the same bytes PUT straight to the gateway with the AWS SDK configured as Coffer configures it.
 *
 * Signed URLs are never logged and never put in an error message here (they carry credentials for their lifetime).
 */
import fs from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { createS3Client } from '../../dist/blobs/s3.js';

export const UPLOAD_EXTENSION = 's3-presigned-upload';

/** Whether a create answer (its Headers) announces the presigned upload (`Coffer-Extensions: s3-presigned-upload`). */
export function offersPresignedUpload(headers) {
  const value = headers?.get?.('coffer-extensions') ?? '';
  return value
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .includes(UPLOAD_EXTENSION);
}

/** One negotiation step: POST /api/backups/upload {type, payload} → its 200 answer's body. */
export async function negotiate(call, type, payload) {
  const answer = await call('POST', '/api/backups/upload', { json: { type, payload } });
  if (answer.status !== 200 || answer.body?.type !== type) {
    throw Object.assign(new Error(`${type} answered ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`), {
      status: answer.status,
    });
  }
  return answer.body;
}

/**
 * PUTs `body` (a Buffer, or {file, start, end} read from disk, `end` inclusive) to a presigned request with exactly
 * its signed headers (node:http, the given agent); resolves the store's ETag.
 */
export function putPresigned(request, body, agent) {
  return new Promise((resolve, reject) => {
    const url = new URL(request.url);
    if (url.protocol !== 'http:') throw new Error(`the benchmark PUTs over http only, the store is at ${url.protocol}`);
    const put = http.request(url, { method: request.method, headers: request.headers, agent }, (response) => {
      response.resume();
      response.on('error', reject);
      response.on('end', () => {
        if (response.statusCode === 200) resolve(response.headers.etag);
        // The status only: the URL is a credential.
        else
          reject(Object.assign(new Error(`presigned ${request.method} answered ${response.statusCode}`), { status: response.statusCode }));
      });
    });
    put.on('error', (error) => reject(new Error(`presigned ${request.method} failed: ${error.code ?? error.message}`)));
    if (Buffer.isBuffer(body)) put.end(body);
    else fs.createReadStream(body.file, { start: body.start, end: body.end }).on('error', reject).pipe(put);
  });
}

/**
 * The whole negotiated upload of one backup's archive, as a client does it: `single` (start with the size, one PUT,
 * complete) when `partBytes` is 0 or the archive fits one part, else multipart (start without size, then per part: sign,
 * PUT; `concurrency` parts in flight; complete with the parts' ETags). `source(offset, length)` gives a part's body (see
 * putPresigned). Resolves complete's answer ({type, pathname, size}). `timings`, when given, gets `transferMs`: the
 * wall time from the first byte's PUT to the last part's ETag (multipart: the part signatures in between included).
 */
export async function presignedUpload(call, backupId, size, source, { partBytes = 0, concurrency = 1, agent, timings } = {}) {
  if (!partBytes || size <= partBytes) {
    const start = await negotiate(call, 's3-presigned.start', { backupId, size });
    if (start.mode !== 'single') throw new Error(`s3-presigned.start with a size answered mode ${start.mode}`);
    const t0 = performance.now();
    await putPresigned(start.request, source(0, size), agent);
    if (timings) timings.transferMs = performance.now() - t0;
    return negotiate(call, 's3-presigned.complete', { backupId, uploadKey: start.uploadKey, size });
  }
  const start = await negotiate(call, 's3-presigned.start', { backupId });
  if (start.mode !== 'multipart') throw new Error(`s3-presigned.start without a size answered mode ${start.mode}`);
  const { uploadKey, uploadId } = start;
  const count = Math.ceil(size / partBytes);
  const parts = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      const offset = index * partBytes;
      const length = Math.min(partBytes, size - offset);
      const partNumber = index + 1;
      const signed = await negotiate(call, 's3-presigned.part', { backupId, uploadKey, uploadId, partNumber, size: length });
      const etag = await putPresigned(signed.request, source(offset, length), agent);
      parts[index] = { partNumber, etag };
    }
  };
  const t0 = performance.now();
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
    if (timings) timings.transferMs = performance.now() - t0;
  } catch (error) {
    await negotiate(call, 's3-presigned.abort', { backupId, uploadKey, uploadId }).catch(() => undefined);
    throw error;
  }
  return negotiate(call, 's3-presigned.complete', { backupId, uploadKey, uploadId, parts, size });
}

/** A part of a file on disk, as putPresigned reads it. */
export const fileSource = (file) => (offset, length) => ({ file, start: offset, end: offset + length - 1 });

/** An S3 client for the store a backend's environment names, configured exactly as Coffer configures its own. */
export function storeClient(env) {
  return {
    bucket: env.COFFER_S3_BUCKET,
    client: createS3Client({
      bucket: env.COFFER_S3_BUCKET,
      endpoint: env.COFFER_S3_ENDPOINT,
      region: env.COFFER_S3_REGION,
      accessKeyId: env.COFFER_S3_ACCESS_KEY_ID,
      secretAccessKey: env.COFFER_S3_SECRET_ACCESS_KEY,
    }),
  };
}

/**
 * The baseline: `size` bytes of `file` PUT straight to the gateway with the AWS SDK (PutObjectCommand, a file stream
 * with its ContentLength: the SDK signs a stream as UNSIGNED-PAYLOAD, so no hashing of the body on either side).
 */
export async function sdkPut({ client, bucket }, key, file, size) {
  await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: fs.createReadStream(file), ContentLength: size }));
}
