/**
 * Presigned S3 requests (docs/upload-protocols.md, s3-presigned): signed with the server's credentials for the
 * endpoint clients reach (COFFER_S3_PUBLIC_ENDPOINT), valid for COFFER_S3_URL_LIFETIME. An upload's signature covers
 * its exact Content-Length, so the store itself refuses a body of any other length.
 *
 * With an endpoint and static credentials (Coffer's settings), the request is built here and signed by the SDK's SigV4
 * signer (@smithy/signature-v4) directly: the same URL getSignedUrl makes (test/blobs/s3-presign.test.ts) for ~25 µs of
 * CPU instead of ~0.4 ms through getSignedUrl's middleware stack, one of the few things a presigned backup still costs
 * the server (bench/p8-steps.js).
 * Anything else (AWS's default endpoint, credentials from the environment's provider chain) goes through the SDK.
 */
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand, UploadPartCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import type { DirectTransfers, PresignedRequest } from './blob-store.js';
import { createS3Client, type S3BlobStoreOptions } from './s3.js';

export interface S3PresignerOptions extends S3BlobStoreOptions {
  /** The endpoint as clients reach it (null: `endpoint`). */
  publicEndpoint: string | null;
  lifetimeMs: number;
  now?: () => number;
}

const SIGNED_LENGTH = new Set(['content-length']);

/** RFC 3986 percent-encoding, as the SDK writes S3 paths (encodeURIComponent leaves !'()* alone). */
const encode = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** SHA-256 and HMAC-SHA256 from node:crypto, in the shape SignatureV4 takes. */
class NodeSha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash =
      secret === undefined
        ? createHash('sha256')
        : createHmac(
            'sha256',
            typeof secret === 'string'
              ? secret
              : Buffer.from(
                  ArrayBuffer.isView(secret) ? new Uint8Array(secret.buffer, secret.byteOffset, secret.byteLength) : new Uint8Array(secret),
                ),
          );
  }
  update(data: Uint8Array | string): void {
    this.hash.update(data);
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.hash.digest());
  }
  reset(): void {}
}

/**
 * The request the SDK would presign for one bucket on one endpoint (path style, UNSIGNED-PAYLOAD), signed by the SDK's
 * own SigV4 signer without its middleware stack.
 */
class QuerySigner {
  private readonly signer: SignatureV4;
  private readonly bucketPath: string;

  constructor(
    private readonly endpoint: URL,
    bucket: string,
    region: string,
    credentials: { accessKeyId: string; secretAccessKey: string },
  ) {
    this.signer = new SignatureV4({ service: 's3', region, credentials, sha256: NodeSha256, uriEscapePath: false, applyChecksum: false });
    this.bucketPath = `/${encode(bucket)}`;
  }

  /** Signs `method` on `key` with the extra query parameters and headers (lowercase names, without host). */
  async url(
    method: string,
    key: string,
    query: Record<string, string>,
    headers: Record<string, string>,
    seconds: number,
    at: number,
  ): Promise<string> {
    const { protocol, hostname, port, host } = this.endpoint;
    const path = `${this.bucketPath}/${key.split('/').map(encode).join('/')}`;
    const request = {
      method,
      protocol,
      hostname,
      ...(port ? { port: Number(port) } : {}),
      path,
      query: { ...query },
      headers: { ...headers, host, 'X-Amz-Content-Sha256': 'UNSIGNED-PAYLOAD' },
    };
    const signed = await this.signer.presign(request, {
      expiresIn: seconds,
      signingDate: new Date(at),
      ...(headers['content-length'] ? { signableHeaders: SIGNED_LENGTH } : {}),
    });
    const search = Object.entries(signed.query ?? {})
      .map(([name, value]) => `${encode(name)}=${encode(String(value))}`)
      .join('&');
    return `${this.endpoint.origin}${path}?${search}`;
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
        ? new QuerySigner(url, options.bucket, options.region ?? 'us-east-1', {
            accessKeyId: options.accessKeyId,
            secretAccessKey: options.secretAccessKey,
          })
        : null;
  }

  async presignPut(key: string, size: number): Promise<PresignedRequest> {
    const issuedAt = this.now();
    const length = { 'content-length': String(size) };
    const url = this.signer
      ? await this.signer.url('PUT', key, { 'x-id': 'PutObject' }, length, this.seconds, issuedAt)
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
      ? await this.signer.url('PUT', key, query, { 'content-length': String(size) }, this.seconds, issuedAt)
      : await getSignedUrl(this.client, new UploadPartCommand(input), {
          expiresIn: this.seconds,
          signableHeaders: SIGNED_LENGTH,
          signingDate: new Date(issuedAt),
        });
    return this.request('PUT', url, issuedAt, size);
  }

  async presignGet(key: string, version?: string | null): Promise<PresignedRequest> {
    const issuedAt = this.now();
    const query: Record<string, string> = version ? { versionId: version, 'x-id': 'GetObject' } : { 'x-id': 'GetObject' };
    const url = this.signer
      ? await this.signer.url('GET', key, query, {}, this.seconds, issuedAt)
      : await getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.bucket, Key: key, VersionId: version ?? undefined }), {
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
