/**
 * Presigned S3 requests (docs/upload-protocols.md, s3-presigned): signed with the server's credentials for the
 * endpoint clients reach (COFFER_S3_PUBLIC_ENDPOINT), valid for COFFER_S3_URL_LIFETIME. An upload's signature covers
 * its exact Content-Length, so the store itself refuses a body of any other length.
 *
 * With an endpoint and static credentials (Coffer's settings), the URLs are signed here (SigV4 query signing, the same
 * URL the AWS SDK's getSignedUrl makes, test/blobs/s3-presign.test.ts): the SDK's presigner cost ~0.4 ms of CPU per URL
 * (its middleware stack), one of the few things a presigned backup still costs the server (bench/p8-steps.js).
 * Anything else (AWS's default endpoint, credentials from the environment's provider chain) goes through the SDK.
 */
import { createHash, createHmac } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand, UploadPartCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { DirectTransfers, PresignedRequest } from './blob-store.js';
import { createS3Client, type S3BlobStoreOptions } from './s3.js';

export interface S3PresignerOptions extends S3BlobStoreOptions {
  /** The endpoint as clients reach it (null: `endpoint`). */
  publicEndpoint: string | null;
  lifetimeMs: number;
  now?: () => number;
}

const SIGNED_LENGTH = new Set(['content-length']);
const ALGORITHM = 'AWS4-HMAC-SHA256';
const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';

/** RFC 3986 percent-encoding, as SigV4 and the SDK's S3 paths want it (encodeURIComponent leaves !'()* alone). */
const encode = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const hmac = (key: Buffer | string, text: string) => createHmac('sha256', key).update(text, 'utf8').digest();

/**
 * SigV4 query signing for one bucket on one endpoint (path style, static credentials, UNSIGNED-PAYLOAD): the canonical
 * request, string to sign and signature as the AWS SDK's presigner computes them; the signing key is kept for its day.
 */
class QuerySigner {
  private readonly origin: string;
  private readonly host: string;
  private readonly bucketPath: string;
  private day = '';
  private dayKey: Buffer = Buffer.alloc(0);

  constructor(
    endpoint: URL,
    bucket: string,
    private readonly region: string,
    private readonly accessKeyId: string,
    private readonly secretAccessKey: string,
  ) {
    this.origin = endpoint.origin;
    this.host = endpoint.host;
    this.bucketPath = `/${encode(bucket)}`;
  }

  /** Signs `method` on `key` with the extra query parameters and headers (lowercase names, without host). */
  url(method: string, key: string, query: Record<string, string>, headers: Record<string, string>, seconds: number, at: number): string {
    const amzDate = new Date(at).toISOString().replace(/[-:]|\.\d{3}/g, '');
    const day = amzDate.slice(0, 8);
    const scope = `${day}/${this.region}/s3/aws4_request`;
    const signed: Record<string, string> = { ...headers, host: this.host };
    const names = Object.keys(signed).sort();
    const signedHeaders = names.join(';');
    const params: Record<string, string> = {
      ...query,
      'X-Amz-Algorithm': ALGORITHM,
      'X-Amz-Content-Sha256': UNSIGNED_PAYLOAD,
      'X-Amz-Credential': `${this.accessKeyId}/${scope}`,
      'X-Amz-Date': amzDate,
      'X-Amz-Expires': String(seconds),
      'X-Amz-SignedHeaders': signedHeaders,
    };
    const canonicalQuery = Object.entries(params)
      .map(([name, value]): [string, string] => [encode(name), encode(value)])
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, value]) => `${name}=${value}`)
      .join('&');
    const path = `${this.bucketPath}/${key.split('/').map(encode).join('/')}`;
    const canonical = [
      method,
      path,
      canonicalQuery,
      names.map((name) => `${name}:${signed[name]}\n`).join(''),
      signedHeaders,
      UNSIGNED_PAYLOAD,
    ].join('\n');
    const toSign = [ALGORITHM, amzDate, scope, createHash('sha256').update(canonical, 'utf8').digest('hex')].join('\n');
    const signature = hmac(this.signingKey(day), toSign).toString('hex');
    return `${this.origin}${path}?${canonicalQuery}&X-Amz-Signature=${signature}`;
  }

  private signingKey(day: string): Buffer {
    if (day !== this.day) {
      const dated = hmac(`AWS4${this.secretAccessKey}`, day);
      this.dayKey = hmac(hmac(hmac(dated, this.region), 's3'), 'aws4_request');
      this.day = day;
    }
    return this.dayKey;
  }
}

export class S3Presigner implements DirectTransfers {
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly seconds: number;
  private readonly now: () => number;
  /** Signing here (an endpoint and static credentials), else null: the SDK's presigner. */
  private readonly signer: QuerySigner | null;

  constructor(options: S3PresignerOptions) {
    const endpoint = options.publicEndpoint ?? options.endpoint;
    this.client = createS3Client({ ...options, endpoint });
    this.bucket = options.bucket;
    this.seconds = Math.max(1, Math.floor(options.lifetimeMs / 1000));
    this.now = options.now ?? Date.now;
    const url = endpoint ? new URL(endpoint) : null;
    this.signer =
      url && url.pathname === '/' && !url.search && options.accessKeyId && options.secretAccessKey
        ? new QuerySigner(url, options.bucket, options.region ?? 'us-east-1', options.accessKeyId, options.secretAccessKey)
        : null;
  }

  async presignPut(key: string, size: number): Promise<PresignedRequest> {
    const issuedAt = this.now();
    const length = { 'content-length': String(size) };
    const url = this.signer
      ? this.signer.url('PUT', key, { 'x-id': 'PutObject' }, length, this.seconds, issuedAt)
      : await getSignedUrl(this.client, new PutObjectCommand({ Bucket: this.bucket, Key: key, ContentLength: size }), {
          expiresIn: this.seconds,
          signableHeaders: SIGNED_LENGTH,
          signingDate: new Date(issuedAt),
        });
    return this.request('PUT', url, issuedAt, size);
  }

  async presignPart(key: string, uploadId: string, partNumber: number, size: number): Promise<PresignedRequest> {
    const issuedAt = this.now();
    const query = { partNumber: String(partNumber), uploadId, 'x-id': 'UploadPart' };
    const input = { Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumber: partNumber, ContentLength: size };
    const url = this.signer
      ? this.signer.url('PUT', key, query, { 'content-length': String(size) }, this.seconds, issuedAt)
      : await getSignedUrl(this.client, new UploadPartCommand(input), {
          expiresIn: this.seconds,
          signableHeaders: SIGNED_LENGTH,
          signingDate: new Date(issuedAt),
        });
    return this.request('PUT', url, issuedAt, size);
  }

  async presignGet(key: string): Promise<PresignedRequest> {
    const issuedAt = this.now();
    const url = this.signer
      ? this.signer.url('GET', key, { 'x-id': 'GetObject' }, {}, this.seconds, issuedAt)
      : await getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.bucket, Key: key }), {
          expiresIn: this.seconds,
          signingDate: new Date(issuedAt),
        });
    return this.request('GET', url, issuedAt);
  }

  private request(method: 'PUT' | 'GET', url: string, issuedAt: number, size?: number): PresignedRequest {
    const headers: Record<string, string> = size === undefined ? {} : { 'content-length': String(size) };
    // X-Amz-Date is to the second: the URL expires `seconds` after the second it was issued in.
    return { method, url, headers, expiresAt: Math.floor(issuedAt / 1000) * 1000 + this.seconds * 1000 };
  }
}
