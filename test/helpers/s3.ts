/**
 * An S3-protocol server on loopback for tests: s3rver on a random port with its own temp directory.
 *
 * s3rver implements multipart uploads but not AbortMultipartUpload, ListMultipartUploads, ListParts or
 * NoSuchUpload; a small middleware adds those four the way S3 answers them (one page each), so the abort and cleanup paths of the S3
 * BlobStore run against an S3 protocol peer, and tests can see leftover parts on s3rver's disk.
 */
import fs from 'node:fs';
import path from 'node:path';
import S3rver from 's3rver';
import { S3BlobStore, type S3BlobStoreOptions } from '../../src/blobs/s3.js';
import { tempDir } from './tmp.js';

export interface TestS3 {
  endpoint: string;
  bucket: string;
  /** s3rver's storage on disk (an object's file mtime is its LastModified). */
  directory: string;
  /** Environment for a Coffer server using this endpoint. */
  env: Record<string, string>;
  options: S3BlobStoreOptions;
  store(overrides?: Partial<S3BlobStoreOptions>): S3BlobStore;
  /** Upload ids of multipart uploads that were neither completed nor aborted. */
  incompleteUploads(): string[];
  /** Part numbers s3rver holds for an incomplete upload. */
  storedParts(uploadId: string): number[];
  /** The file in which s3rver holds (or is writing) an object's bytes. */
  objectFile(key: string): string;
  close(): Promise<void>;
}

const escapeXml = (text: string) => text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

export async function startS3(bucket = 'coffer-test'): Promise<TestS3> {
  const directory = tempDir('coffer-s3-');
  const uploadsDir = path.join(directory, bucket, '._S3rver_uploads');
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });

  const noSuchUpload = (ctx: any) => {
    ctx.status = 404;
    ctx.type = 'application/xml';
    ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>';
  };
  server.middleware.unshift(async (ctx, next) => {
    const [bucketName, ...keyParts] = (ctx.path as string).split('/').filter(Boolean);
    if (bucketName !== bucket) return next();
    const query = ctx.query as Record<string, string>;
    if (keyParts.length === 0 && ctx.method === 'GET' && 'uploads' in query) {
      const uploads = fs.existsSync(uploadsDir) ? fs.readdirSync(uploadsDir) : [];
      const items = uploads.flatMap((id) => {
        const dir = path.join(uploadsDir, id);
        const key = fs.readFileSync(path.join(dir, 'key'), 'utf8');
        if (!key.startsWith(query.prefix ?? '')) return [];
        const initiated = fs.statSync(path.join(dir, 'key')).mtime.toISOString();
        return [`<Upload><Key>${escapeXml(key)}</Key><UploadId>${id}</UploadId><Initiated>${initiated}</Initiated></Upload>`];
      });
      ctx.type = 'application/xml';
      ctx.body =
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
        `<Bucket>${bucket}</Bucket><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>${items.join('')}</ListMultipartUploadsResult>`;
      return;
    }
    if (keyParts.length > 0 && 'uploadId' in query) {
      const dir = path.join(uploadsDir, path.basename(query.uploadId ?? ''));
      if (!fs.existsSync(path.join(dir, 'key'))) return noSuchUpload(ctx);
      if (ctx.method === 'DELETE') {
        fs.rmSync(dir, { recursive: true, force: true });
        ctx.status = 204;
        return;
      }
      if (ctx.method === 'GET') {
        const parts = fs
          .readdirSync(dir)
          // s3rver writes a part's .md5 file once the part is complete.
          .filter((name) => /^\d+$/.test(name) && fs.existsSync(path.join(dir, `${name}.md5`)))
          .map((name) => {
            const md5 = fs.readFileSync(path.join(dir, `${name}.md5`), 'utf8');
            const size = fs.statSync(path.join(dir, name)).size;
            return `<Part><PartNumber>${name}</PartNumber><ETag>"${md5}"</ETag><Size>${size}</Size></Part>`;
          });
        ctx.type = 'application/xml';
        ctx.body =
          '<?xml version="1.0" encoding="UTF-8"?>\n<ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
          `<Bucket>${bucket}</Bucket><UploadId>${escapeXml(query.uploadId ?? '')}</UploadId><IsTruncated>false</IsTruncated>${parts.join('')}</ListPartsResult>`;
        return;
      }
    }
    return next();
  });

  // s3rver removes the "directories" a delete empties; a put into the same prefix at that moment then fails
  // inside s3rver with an uncaught ENOENT. S3 has no directories: keep them, and only unlink the object's files.
  const fsStore = (server as unknown as { store: { getResourcePath(b: string, k: string, r: string): string; deleteObject: unknown } }).store;
  fsStore.deleteObject = async (bucketName: string, key: string) => {
    for (const resource of ['object', 'object.md5', 'metadata.json']) {
      await fs.promises.unlink(fsStore.getResourcePath(bucketName, key, resource)).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
      });
    }
  };

  const address = await server.run();
  const endpoint = `http://127.0.0.1:${address.port}`;
  const options: S3BlobStoreOptions = {
    bucket,
    endpoint,
    region: 'us-east-1',
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
  };
  return {
    endpoint,
    bucket,
    directory,
    options,
    env: {
      COFFER_BLOB_STORE: 's3',
      COFFER_S3_ENDPOINT: endpoint,
      COFFER_S3_BUCKET: bucket,
      COFFER_S3_REGION: 'us-east-1',
      COFFER_S3_ACCESS_KEY_ID: 'S3RVER',
      COFFER_S3_SECRET_ACCESS_KEY: 'S3RVER',
    },
    store: (overrides = {}) => new S3BlobStore({ ...options, ...overrides }),
    incompleteUploads: () => (fs.existsSync(uploadsDir) ? fs.readdirSync(uploadsDir) : []),
    storedParts: (uploadId) =>
      fs
        .readdirSync(path.join(uploadsDir, uploadId))
        .filter((name) => /^\d+$/.test(name))
        .map(Number),
    objectFile: (key) => fsStore.getResourcePath(bucket, key, 'object'),
    async close() {
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
