/**
 * Serving stored content (a backup's ciphertext) with a strong ETag and resumable downloads
 * (docs/api-rules.md#download): one satisfiable `bytes` range gives 206 with Content-Range, and only while
 * If-Range is absent or names the current ETag; anything else (no Range, several ranges, an unsatisfiable or
 * malformed one, a stale If-Range) gives the whole content, 200.
 */
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import parseRange from 'range-parser';
import type { ByteRange } from '../blobs/blob-store.js';

export interface StoredContent {
  size: number;
  etag: string;
  /** The file name a browser saves it under (Content-Disposition: attachment). */
  filename: string;
  /** Opens the bytes, or only `range` of them; may throw (an AppError) before anything is sent. */
  open(range: ByteRange | undefined): Promise<Readable>;
}

/** The single byte range to answer with, or undefined for the whole content. */
export function requestedRange(request: FastifyRequest, size: number, etag: string): ByteRange | undefined {
  const ifRange = request.headers['if-range'];
  const rangeHeader = request.headers.range;
  const parsed = rangeHeader && (ifRange === undefined || ifRange === etag) ? parseRange(size, rangeHeader) : -1;
  return Array.isArray(parsed) && parsed.type === 'bytes' && parsed.length === 1 ? parsed[0] : undefined;
}

export async function sendContent(request: FastifyRequest, reply: FastifyReply, content: StoredContent): Promise<FastifyReply> {
  const { size, etag } = content;
  const range = requestedRange(request, size, etag);
  const stream = await content.open(range);
  reply
    .header('content-type', 'application/octet-stream')
    .header('content-disposition', `attachment; filename="${content.filename}"`)
    .header('etag', etag)
    .header('cache-control', 'private, no-store')
    .header('accept-ranges', 'bytes');
  if (range) {
    reply
      .code(206)
      .header('content-range', `bytes ${range.start}-${range.end}/${size}`)
      .header('content-length', range.end - range.start + 1);
  } else {
    reply.code(200).header('content-length', size);
  }
  return reply.send(stream);
}
