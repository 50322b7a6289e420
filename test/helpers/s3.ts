/**
 * An S3-protocol server on loopback for tests, on one of two engines (`S3_ENGINES`):
 * - `ceph`: a bucket of its own on the run's throwaway Ceph cluster (RADOS Gateway, a real S3 implementation;
 *   test/helpers/ceph.ts, started by global-setup.ts). Where the engines differ, Ceph is right unless AWS
 *   documents otherwise. When Ceph is unavailable its suites are skipped, unless the run requires `ceph`
 *   (test/helpers/required.ts): then they fail.
 * - `s3rver`: s3rver on a random port with its own temp directory.
 *
 * s3rver implements multipart uploads but not AbortMultipartUpload, ListMultipartUploads, ListParts or
 * NoSuchUpload; a small middleware adds those four the way S3 answers them (one page each), so the abort and cleanup paths of the S3
 * BlobStore run against an S3 protocol peer, and tests can see leftover parts on s3rver's disk.
 */
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
} from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { createS3Client, S3BlobStore, type S3BlobStoreOptions } from '../../src/blobs/s3.js';
import { lacking, required } from './required.js';
import { tempDir } from './tmp.js';

export type S3Engine = 's3rver' | 'ceph';
export const S3_ENGINES: readonly S3Engine[] = ['s3rver', 'ceph'];

/** CI installs Ceph (.ci/run): there a Ceph suite that cannot reach it fails instead of skipping (required.ts). */
export const REQUIRE_CEPH = required('ceph');

interface CephState {
  endpoint?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  error?: string;
  starting?: boolean;
}

/** Waits for the run's Ceph cluster (started by global-setup.ts) to be up or to have failed. */
async function cephState(): Promise<CephState> {
  const file = process.env.COFFER_TEST_CEPH_STATE;
  if (!file) return { error: 'no Ceph cluster was started for this run (test/helpers/global-setup.ts)' };
  const deadline = Date.now() + 90_000;
  for (;;) {
    let state: CephState;
    try {
      state = JSON.parse(fs.readFileSync(file, 'utf8')) as CephState;
    } catch (error) {
      return { error: `cannot read the Ceph state: ${(error as Error).message}` };
    }
    if (!state.starting) return state;
    if (Date.now() > deadline) return { error: 'Ceph did not start within 90 s' };
    await sleep(100);
  }
}

const ceph = await cephState();
if (ceph.error && !REQUIRE_CEPH) console.warn(`${ceph.error.split('\n')[0]}`);
const skipCeph = lacking(ceph.error === undefined, 'ceph');

/** Whether an engine's suites are skipped here (Ceph unavailable and not required). */
export function skipEngine(engine: S3Engine): boolean {
  return engine === 'ceph' && skipCeph;
}

export interface TestS3 {
  engine: S3Engine;
  endpoint: string;
  bucket: string;
  /** s3rver only: its storage on disk (an object's file mtime is its LastModified). */
  directory?: string;
  /** Environment for a Coffer server using this endpoint. */
  env: Record<string, string>;
  options: S3BlobStoreOptions;
  store(overrides?: Partial<S3BlobStoreOptions>): S3BlobStore;
  /** Upload ids of multipart uploads that were neither completed nor aborted. */
  incompleteUploads(): Promise<string[]>;
  /** Part numbers the store holds for an incomplete upload. */
  storedParts(uploadId: string): Promise<number[]>;
  /** Whether the store holds an object under `key`. */
  has(key: string): Promise<boolean>;
  /** s3rver only: the file in which s3rver holds (or is writing) an object's bytes. */
  objectFile?(key: string): string;
  /**
   * s3rver only: true once s3rver handles no request that may still write, false if one still does after
   * `withinMs`. s3rver finishes writing a body it has whole after its client is gone (a killed server), so its files
   * settle only then.
   */
  settled?(withinMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export interface StartS3Options {
  /**
   * s3rver only. false: leave out the middleware's ListMultipartUploads and ListParts (s3rver then answers 501
   * NotImplemented and 405 MethodNotAllowed, as a store without these optional calls does).
   */
  listCalls?: boolean;
  /**
   * s3rver only. true: requests signed in the Authorization header (SigV4, as the AWS SDK signs) are checked against
   * the secret `S3RVER` and refused with 403 SignatureDoesNotMatch when wrong, as S3 does (s3rver itself accepts any
   * SigV4 signature). Query-string (presigned) requests are not checked.
   */
  checkSignatures?: boolean;
}

const S3RVER_SECRET = 'S3RVER';

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
const rfc3986 = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * Whether a SigV4 Authorization header matches the request, signed with `secret` (AWS's "Signature Version 4"
 * canonical request; S3 signs the path as sent, without encoding it again). Undefined: not a SigV4 header request.
 */
function sigV4Matches(
  request: { method: string; url: string; headers: Record<string, string | string[] | undefined> },
  secret: string,
): boolean | undefined {
  const authorization = request.headers.authorization;
  if (typeof authorization !== 'string' || !authorization.startsWith('AWS4-HMAC-SHA256 ')) return undefined;
  const fields = Object.fromEntries(
    authorization
      .slice('AWS4-HMAC-SHA256 '.length)
      .split(',')
      .map((part) => part.trim().split('=', 2) as [string, string]),
  );
  const [, date, region, service] = (fields.Credential ?? '').split('/');
  const signedHeaders = (fields.SignedHeaders ?? '').split(';');
  const [rawPath = '', rawQuery = ''] = request.url.split('?', 2);
  const query = rawQuery
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const [key = '', value = ''] = pair.split('=', 2);
      return [rfc3986(decodeURIComponent(key)), rfc3986(decodeURIComponent(value.replace(/\+/g, ' ')))] as const;
    })
    .sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0))
    .map(([key, value]) => `${key}=${value}`)
    .join('&');
  const header = (name: string) => {
    const value = request.headers[name];
    return (Array.isArray(value) ? value.join(',') : (value ?? '')).trim().replace(/\s+/g, ' ');
  };
  const canonical = [
    request.method,
    rawPath,
    query,
    signedHeaders.map((name) => `${name}:${header(name)}\n`).join(''),
    signedHeaders.join(';'),
    header('x-amz-content-sha256') || 'UNSIGNED-PAYLOAD',
  ].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', header('x-amz-date'), scope, createHash('sha256').update(canonical).digest('hex')].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date ?? ''), region ?? ''), service ?? ''), 'aws4_request');
  return hmac(key, toSign).toString('hex') === fields.Signature;
}

/** An S3 endpoint on `engine`, with a fresh bucket. */
export async function startS3(engine: S3Engine = 's3rver', bucket?: string, options: StartS3Options = {}): Promise<TestS3> {
  return engine === 'ceph' ? startCephBucket(bucket) : startS3rver(bucket, options);
}

/**
 * A bucket with Object Lock enabled (`<bucket>-<suffix>`) next to a Ceph test bucket, with its own client; `remove`
 * deletes every version (with the governance bypass when `bypass`: the test may, Coffer never does) and the bucket.
 */
export async function lockBucket(s3: TestS3, suffix = 'lock') {
  const name = `${s3.bucket}-${suffix}`;
  const client = createS3Client({ ...s3.options, bucket: name });
  await client.send(new CreateBucketCommand({ Bucket: name, ObjectLockEnabledForBucket: true }));
  const versions = async (prefix = '') => {
    const page = await client.send(new ListObjectVersionsCommand({ Bucket: name, Prefix: prefix }));
    return [...(page.Versions ?? []), ...(page.DeleteMarkers ?? [])].map((v) => ({ key: v.Key!, version: v.VersionId! }));
  };
  return {
    name,
    client,
    env: { ...s3.env, COFFER_S3_BUCKET: name },
    versions,
    async remove(bypass: boolean) {
      for (const { key, version } of await versions()) {
        await client.send(new DeleteObjectCommand({ Bucket: name, Key: key, VersionId: version, BypassGovernanceRetention: bypass }));
      }
      await client.send(new DeleteBucketCommand({ Bucket: name }));
      client.destroy();
    },
  };
}

export type LockBucket = Awaited<ReturnType<typeof lockBucket>>;

async function startCephBucket(name?: string): Promise<TestS3> {
  if (ceph.error) throw new Error(`${ceph.error}${REQUIRE_CEPH ? ' (the run requires ceph: its suites must not be skipped)' : ''}`);
  const bucket = name ?? `coffer-${randomBytes(8).toString('hex')}`;
  const options: S3BlobStoreOptions = {
    bucket,
    endpoint: ceph.endpoint!,
    region: 'us-east-1',
    accessKeyId: ceph.accessKeyId!,
    secretAccessKey: ceph.secretAccessKey!,
  };
  const client = createS3Client(options);
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  const uploads = async () => {
    const found: { key: string; uploadId: string }[] = [];
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    do {
      const page = await client.send(
        new ListMultipartUploadsCommand({ Bucket: bucket, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }),
      );
      for (const upload of page.Uploads ?? []) found.push({ key: upload.Key!, uploadId: upload.UploadId! });
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      uploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
    } while (keyMarker);
    return found;
  };
  return {
    engine: 'ceph',
    endpoint: ceph.endpoint!,
    bucket,
    options,
    env: {
      COFFER_BLOB_STORE: 's3',
      COFFER_S3_ENDPOINT: ceph.endpoint!,
      COFFER_S3_BUCKET: bucket,
      COFFER_S3_REGION: 'us-east-1',
      COFFER_S3_ACCESS_KEY_ID: ceph.accessKeyId!,
      COFFER_S3_SECRET_ACCESS_KEY: ceph.secretAccessKey!,
    },
    store: (overrides = {}) => new S3BlobStore({ ...options, ...overrides }),
    incompleteUploads: async () => (await uploads()).map((upload) => upload.uploadId),
    async storedParts(uploadId) {
      const upload = (await uploads()).find((u) => u.uploadId === uploadId);
      if (!upload) return [];
      const page = await client.send(new ListPartsCommand({ Bucket: bucket, Key: upload.key, UploadId: uploadId }));
      return (page.Parts ?? []).map((part) => part.PartNumber!);
    },
    async has(key) {
      try {
        await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        return true;
      } catch (error) {
        if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return false;
        throw error;
      }
    },
    async close() {
      for (const upload of await uploads()) {
        await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: upload.key, UploadId: upload.uploadId }));
      }
      let token: string | undefined;
      do {
        const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
        for (const object of page.Contents ?? []) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: object.Key! }));
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      await client.send(new DeleteBucketCommand({ Bucket: bucket }));
      client.destroy();
    },
  };
}

/**
 * Until s3rver has opened the file of every part it answered for (at most 2 s): it answers a part's upload once the
 * part's .md5 is written, which can be before its write stream has opened the part's own file, and that open throws
 * ENOENT out of s3rver (an uncaught error in this process) when an abort removed the folder first.
 */
async function partsOpened(dir: string): Promise<void> {
  for (let waited = 0; waited < 2000; waited += 10) {
    const names = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
    const answered = names.filter((name) => name.endsWith('.md5')).map((name) => name.slice(0, -'.md5'.length));
    if (answered.every((part) => names.includes(part))) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const escapeXml = (text: string) => text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

async function startS3rver(bucket = 'coffer-test', { listCalls = true, checkSignatures = false }: StartS3Options = {}): Promise<TestS3> {
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
    ctx.body =
      '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>';
  };
  const completing = new Map<string, Promise<void>>();
  server.middleware.unshift(async (ctx, next) => {
    const [bucketName, ...keyParts] = (ctx.path as string).split('/').filter(Boolean);
    if (bucketName !== bucket) return next();
    const query = ctx.query as Record<string, string>;
    if (keyParts.length === 0 && ctx.method === 'GET' && 'uploads' in query && listCalls) {
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
      const id = path.basename(query.uploadId ?? '');
      const dir = path.join(uploadsDir, id);
      // A completion in flight is finished first, as S3 does: s3rver opens the parts after its own checks, and an
      // abort (or a second completion) that removed them meanwhile made it throw ENOENT out of its request.
      if (ctx.method === 'DELETE' || ctx.method === 'POST') await completing.get(id);
      if (!fs.existsSync(path.join(dir, 'key'))) return noSuchUpload(ctx);
      if (ctx.method === 'POST') {
        const completion = next();
        const settledCompletion = completion.then(
          () => undefined,
          () => undefined,
        );
        completing.set(id, settledCompletion);
        try {
          return await completion;
        } finally {
          if (completing.get(id) === settledCompletion) completing.delete(id);
        }
      }
      if (ctx.method === 'DELETE') {
        await partsOpened(dir);
        fs.rmSync(dir, { recursive: true, force: true });
        ctx.status = 204;
        return;
      }
      if (ctx.method === 'GET' && listCalls) {
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

  // First of all (unshifted last): the signature check, when asked for.
  if (checkSignatures) {
    server.middleware.unshift(async (ctx, next) => {
      if (
        sigV4Matches(ctx.req as { method: string; url: string; headers: Record<string, string | string[] | undefined> }, S3RVER_SECRET) !==
        false
      ) {
        return next();
      }
      ctx.status = 403;
      ctx.type = 'application/xml';
      ctx.body =
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code>' +
        '<Message>The request signature we calculated does not match the signature you provided.</Message></Error>';
    });
  }
  // Outermost (unshifted last): the requests s3rver is still handling, for settled().
  const handling = new Set<http.IncomingMessage>();
  server.middleware.unshift(async (ctx, next) => {
    handling.add(ctx.req);
    try {
      await next();
    } finally {
      handling.delete(ctx.req);
    }
  });
  // s3rver removes the "directories" a delete empties; a put into the same prefix at that moment then fails
  // inside s3rver with an uncaught ENOENT. S3 has no directories: keep them, and only unlink the object's files.
  const fsStore = (server as unknown as { store: { getResourcePath(b: string, k: string, r: string): string; deleteObject: unknown } })
    .store;
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
    engine: 's3rver',
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
    incompleteUploads: async () => (fs.existsSync(uploadsDir) ? fs.readdirSync(uploadsDir) : []),
    storedParts: async (uploadId) =>
      fs
        .readdirSync(path.join(uploadsDir, uploadId))
        .filter((name) => /^\d+$/.test(name))
        .map(Number),
    has: async (key) => fs.existsSync(fsStore.getResourcePath(bucket, key, 'object')),
    objectFile: (key) => fsStore.getResourcePath(bucket, key, 'object'),
    async settled(withinMs) {
      // A request whose client is gone before its body was whole never writes anything (s3rver may keep it open
      // for good); any other request still open may.
      const writing = () => [...handling].some((request) => request.complete || !request.socket.destroyed);
      for (const deadline = Date.now() + withinMs; writing(); await sleep(25)) if (Date.now() > deadline) return false;
      return true;
    },
    async close() {
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
