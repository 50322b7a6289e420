/**
 * Presigned S3 requests (docs/upload-protocols.md, s3-presigned): signed with the server's credentials for the
 * endpoint clients reach (COFFER_S3_PUBLIC_ENDPOINT), valid for COFFER_S3_URL_LIFETIME. An upload's signature covers
 * its exact Content-Length, so the store itself refuses a body of any other length.
 */
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

export class S3Presigner implements DirectTransfers {
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly seconds: number;
  private readonly now: () => number;

  constructor(options: S3PresignerOptions) {
    this.client = createS3Client({ ...options, endpoint: options.publicEndpoint ?? options.endpoint });
    this.bucket = options.bucket;
    this.seconds = Math.max(1, Math.floor(options.lifetimeMs / 1000));
    this.now = options.now ?? Date.now;
  }

  async presignPut(key: string, size: number): Promise<PresignedRequest> {
    const issuedAt = this.now();
    const command = new PutObjectCommand({ Bucket: this.bucket, Key: key, ContentLength: size });
    const url = await getSignedUrl(this.client, command, { expiresIn: this.seconds, signableHeaders: SIGNED_LENGTH });
    return this.request('PUT', url, issuedAt, size);
  }

  async presignPart(key: string, uploadId: string, partNumber: number, size: number): Promise<PresignedRequest> {
    const issuedAt = this.now();
    const input = { Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumber: partNumber, ContentLength: size };
    const url = await getSignedUrl(this.client, new UploadPartCommand(input), { expiresIn: this.seconds, signableHeaders: SIGNED_LENGTH });
    return this.request('PUT', url, issuedAt, size);
  }

  async presignGet(key: string): Promise<PresignedRequest> {
    const issuedAt = this.now();
    const url = await getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.bucket, Key: key }), { expiresIn: this.seconds });
    return this.request('GET', url, issuedAt);
  }

  private request(method: 'PUT' | 'GET', url: string, issuedAt: number, size?: number): PresignedRequest {
    const headers: Record<string, string> = size === undefined ? {} : { 'content-length': String(size) };
    // X-Amz-Date is to the second: the URL expires `seconds` after the second it was issued in.
    return { method, url, headers, expiresAt: Math.floor(issuedAt / 1000) * 1000 + this.seconds * 1000 };
  }
}
