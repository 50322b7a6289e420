/**
 * S3 Object Lock (docs/deploy.md#object-lock) on Ceph's RADOS Gateway, through a real server's HTTP API: every backup's
 * object is written with a retention in the chosen mode until at least its expiry plus the account's deletion grace,
 * recorded as lockedUntil with the version Coffer wrote. With the server's own credentials that version cannot be
 * deleted (compliance: not even with BypassGovernanceRetention), and neither an overwrite nor a delete marker changes
 * what a restore returns. A delete through the API hides the backup (undelete works in the grace); the sweeper leaves
 * the object while it is locked and removes it once its retention has ended. The presigned path locks too; a server
 * refuses to start when the setting and the bucket disagree, and the fs store refuses any lock setting.
 *
 * Locks are real time at the store, so the compliance suite's server runs on a clock set back by the plan's retention,
 * the upload window and the grace: its backups' locks end within a minute of real time, and the test waits for that.
 * The governance suite's locks last days (as in production); its bucket is emptied with BypassGovernanceRetention.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteObjectCommand, GetObjectRetentionCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upload } from '@vercel/blob/client';
import { ConfigError, loadConfig } from '../../src/config.js';
import { DAY_MS } from '../../src/domain/backups.js';
import { PLAN_RULES } from '../../src/domain/plans.js';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { lockBucket, skipEngine, startS3, type LockBucket, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const WINDOW_MS = 3_600_000;
const GRACE_DAYS = 2;
/** How long after the compliance suite starts its backups' locks end (real time). */
const COMPLIANCE_LOCK_MS = 45_000;

const status = (error: unknown) => ({
  name: (error as Error).name,
  status: (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode,
});

async function refusal(client: S3Client, command: DeleteObjectCommand) {
  try {
    await client.send(command);
    return { name: 'none', status: 200 };
  } catch (error) {
    return status(error);
  }
}

/** A pro account with a vault and a deletion grace of GRACE_DAYS, and its API. */
async function owner(server: TestServer) {
  const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
  const call = api(server.url, apiKey);
  expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
  await server.parts.retention.setDeletionGrace(accountId, GRACE_DAYS);
  return { call, accountId, apiKey };
}

/** create → direct upload → finalize. */
async function readyBackup(call: ReturnType<typeof api>, data: Buffer) {
  const created = await call('POST', '/api/backups');
  expect(created.status).toBe(201);
  const id = created.body.backupId as string;
  const uploaded = await call('POST', `/api/backups/upload?backupId=${id}`, {
    body: new Uint8Array(data),
    headers: { 'content-type': 'application/octet-stream' },
  });
  expect(uploaded.status).toBe(201);
  expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
  return id;
}

async function consoleSession(server: TestServer, accountId: string) {
  const { token } = (await server.parts.sessions.createLoginLink(accountId))!;
  const opened = await fetch(`${server.url}/console/api/session`, {
    method: 'POST',
    headers: { origin: server.url, 'content-type': 'application/json' },
    body: JSON.stringify({ loginToken: token }),
  });
  expect(opened.status).toBe(200);
  const cookie = opened.headers.get('set-cookie')!.split(';')[0]!;
  const { csrfToken } = (await opened.json()) as { csrfToken: string };
  return (method: string, url: string) =>
    fetch(`${server.url}${url}`, { method, headers: { cookie, origin: server.url, 'x-csrf-token': csrfToken } });
}

describe.skipIf(skipEngine('ceph'))('Object Lock on Ceph: compliance', () => {
  const lockEndsAt = Date.now() + COMPLIANCE_LOCK_MS;
  // Set back so that objectLockUntil (slot end + plan retention + grace) falls at lockEndsAt in real time.
  const clock = new ManualClock(lockEndsAt - WINDOW_MS - PLAN_RULES.pro.retentionMs - GRACE_DAYS * DAY_MS);
  let s3: TestS3;
  let bucket: LockBucket;
  let server: TestServer;

  beforeAll(async () => {
    s3 = await startS3('ceph');
    bucket = await lockBucket(s3);
    server = await startTestServer({ clock, env: { ...bucket.env, COFFER_S3_OBJECT_LOCK: 'compliance', COFFER_UPLOAD_WINDOW: '1h' } });
  });
  afterAll(async () => {
    await server?.stop();
    if (bucket) {
      // Compliance: nothing removes a version before its retention ends, not even the bucket's owner.
      while (Date.now() <= lockEndsAt + 1000) await sleep(500);
      await bucket.remove(false);
    }
    await s3?.close();
  });

  it('a backup is locked until its expiry plus the grace, refused to the server’s credentials, read by its version, removed once the lock ends', async () => {
    const { call, accountId } = await owner(server);
    const data = randomBytes(70_000);
    const id = await readyBackup(call, data);

    // (a) The retention the store holds, in COMPLIANCE mode, is what the record says, and outlasts expiry + grace.
    const record = (await server.parts.stores.backups.getBackup(id))!;
    expect(record.blobVersion).toEqual(expect.any(String));
    expect(record.lockedUntil).toBe(lockEndsAt);
    expect(record.lockedUntil).toBeGreaterThanOrEqual(record.expiresAt + GRACE_DAYS * DAY_MS);
    const retention = await bucket.client.send(
      new GetObjectRetentionCommand({ Bucket: bucket.name, Key: record.blobKey!, VersionId: record.blobVersion! }),
    );
    expect(retention.Retention).toEqual({ Mode: 'COMPLIANCE', RetainUntilDate: new Date(lockEndsAt) });

    // (b) With the server's own credentials: the version cannot be deleted, with or without the bypass.
    const remove = (bypass: boolean) =>
      refusal(
        bucket.client,
        new DeleteObjectCommand({
          Bucket: bucket.name,
          Key: record.blobKey!,
          VersionId: record.blobVersion!,
          BypassGovernanceRetention: bypass,
        }),
      );
    expect(await remove(false)).toEqual({ name: 'AccessDenied', status: 403 });
    expect(await remove(true)).toEqual({ name: 'AccessDenied', status: 403 });
    // An overwrite adds a version the server never reads; a delete marker hides nothing from it.
    await bucket.client.send(new PutObjectCommand({ Bucket: bucket.name, Key: record.blobKey!, Body: 'not the backup' }));
    expect((await call('GET', `/api/backups/${id}/content`)).raw.equals(data)).toBe(true);
    await bucket.client.send(new DeleteObjectCommand({ Bucket: bucket.name, Key: record.blobKey! }));
    const content = await call('GET', `/api/backups/${id}/content`);
    expect(content.status).toBe(200);
    expect(content.raw.equals(data)).toBe(true);
    const range = await call('GET', `/api/backups/${id}/content`, { headers: { range: 'bytes=100-199' } });
    expect(range.status).toBe(206);
    expect(range.raw.equals(data.subarray(100, 200))).toBe(true);

    // (c) A delete through the API hides it; the owner restores it within the grace.
    expect((await call('DELETE', `/api/backups/${id}`)).body.status).toBe('DELETING');
    expect((await call('GET', `/api/backups/${id}`)).status).toBe(404);
    const session = await consoleSession(server, accountId);
    expect((await session('POST', `/console/api/deletions/${id}/restore`)).status).toBe(200);
    expect((await call('GET', `/api/backups/${id}/content`)).raw.equals(data)).toBe(true);

    // Deleted again and past the grace: DELETED, but the object stays while it is locked, also over later sweeps.
    expect((await call('DELETE', `/api/backups/${id}`)).body.status).toBe('DELETING');
    clock.advance(GRACE_DAYS * DAY_MS + 1000);
    await server.sweepOnce();
    await server.parts.sweeper.removeOrphans(0);
    const deleted = (await server.parts.stores.backups.getBackup(id))!;
    expect(deleted).toMatchObject({ status: 'DELETED', lockedUntil: lockEndsAt });
    expect(await bucket.versions(record.blobKey!)).toContainEqual({ key: record.blobKey!, version: record.blobVersion! });
    expect((await call('GET', `/api/backups/${id}`)).status).toBe(404);

    // Once its retention has ended (real time at the store, the server's clock past it), the sweeper removes every
    // version of the key, the overwrite and the delete marker too, and the record no longer says locked.
    while (Date.now() <= lockEndsAt) await sleep(250);
    clock.advance(lockEndsAt - clock.now() + 1000);
    await server.sweepOnce();
    expect(await bucket.versions(record.blobKey!)).toEqual([]);
    expect((await server.parts.stores.backups.getBackup(id))!).toMatchObject({ status: 'DELETED', lockedUntil: null });
  });
});

describe.skipIf(skipEngine('ceph'))('Object Lock on Ceph: governance, presigned uploads', () => {
  const clock = new ManualClock(Date.now());
  let s3: TestS3;
  let bucket: LockBucket;
  let server: TestServer;

  beforeAll(async () => {
    s3 = await startS3('ceph');
    bucket = await lockBucket(s3);
    server = await startTestServer({ clock, env: { ...bucket.env, COFFER_S3_OBJECT_LOCK: 'governance', COFFER_S3_PRESIGNED: 'on' } });
  });
  afterAll(async () => {
    await server?.stop();
    // Governance: the test (not Coffer, which never sends the bypass) may remove locked versions.
    await bucket?.remove(true);
    await s3?.close();
  });

  async function lockOf(id: string) {
    const record = (await server.parts.stores.backups.getBackup(id))!;
    const retention = await bucket.client.send(
      new GetObjectRetentionCommand({ Bucket: bucket.name, Key: record.blobKey!, VersionId: record.blobVersion! }),
    );
    return { record, retention: retention.Retention };
  }

  it('a direct upload is locked in GOVERNANCE mode; without the bypass the server’s credentials cannot delete it', async () => {
    const { call } = await owner(server);
    const data = randomBytes(10_000);
    const id = await readyBackup(call, data);
    const { record, retention } = await lockOf(id);
    expect(retention).toEqual({ Mode: 'GOVERNANCE', RetainUntilDate: new Date(record.lockedUntil!) });
    expect(record.lockedUntil).toBeGreaterThanOrEqual(record.expiresAt + GRACE_DAYS * DAY_MS);
    const refused = await refusal(
      bucket.client,
      new DeleteObjectCommand({ Bucket: bucket.name, Key: record.blobKey!, VersionId: record.blobVersion! }),
    );
    expect(refused).toEqual({ name: 'AccessDenied', status: 403 });

    // The server's clock past the lock while the store's is not: the store refuses, the record stays locked, nothing
    // fails; an orphan pass skips the object quietly.
    expect((await call('DELETE', `/api/backups/${id}`)).body.status).toBe('DELETING');
    const saved = clock.now();
    clock.advance(record.lockedUntil! - clock.now() + 1000);
    await server.sweepOnce();
    expect(await server.parts.sweeper.removeOrphans(0)).toMatchObject({ orphans: 0 });
    expect((await server.parts.stores.backups.getBackup(id))!).toMatchObject({ status: 'DELETED', lockedUntil: record.lockedUntil });
    expect(await bucket.versions(record.blobKey!)).toEqual([{ key: record.blobKey!, version: record.blobVersion! }]);
    clock.advance(saved - clock.now());

    // A locked object no record names (an upload attempt locked before it lost its race) is skipped quietly too.
    const orphan = `backups/${randomBytes(4).toString('hex')}/attempt.bin`;
    await bucket.client.send(
      new PutObjectCommand({
        Bucket: bucket.name,
        Key: orphan,
        Body: 'orphan',
        ObjectLockMode: 'GOVERNANCE',
        ObjectLockRetainUntilDate: new Date(Date.now() + DAY_MS),
      }),
    );
    expect(await server.parts.sweeper.removeOrphans(0)).toMatchObject({ orphans: 0 });
    expect(await bucket.versions(orphan)).toHaveLength(1);
  });

  it('a direct upload of unknown length over one part (a multipart upload, whose lock Ceph ignores) is locked too', async () => {
    const { call } = await owner(server);
    const data = randomBytes(6 * 1024 * 1024 + 1000);
    const created = await call('POST', '/api/backups');
    const id = created.body.backupId as string;
    const chunked = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < data.length; at += 1024 * 1024) controller.enqueue(new Uint8Array(data.subarray(at, at + 1024 * 1024)));
        controller.close();
      },
    });
    const uploaded = await call('POST', `/api/backups/upload?backupId=${id}`, {
      body: chunked,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(uploaded.status).toBe(201);
    const { record, retention } = await lockOf(id);
    expect(record.status).toBe('UPLOADED');
    expect(retention).toEqual({ Mode: 'GOVERNANCE', RetainUntilDate: new Date(record.lockedUntil!) });
  });

  it('presigned uploads (one PUT, and multipart) are locked before the backup becomes UPLOADED', async () => {
    const { call } = await owner(server);
    for (const multipart of [false, true]) {
      clock.advance(31 * 60_000); // the pro plan's cadence
      const created = await call('POST', '/api/backups');
      expect(created.status).toBe(201);
      const backupId = created.body.backupId as string;
      const negotiate = (type: string, payload: Record<string, unknown>) =>
        call('POST', '/api/backups/upload', { json: { type: `s3-presigned.${type}`, payload: { backupId, ...payload } } });
      const data = randomBytes(multipart ? 6 * 1024 * 1024 : 40_000);
      const start = await negotiate('start', multipart ? {} : { size: data.length });
      expect(start.status).toBe(200);
      const { uploadKey, uploadId } = start.body;
      const parts: { partNumber: number; etag: string }[] = [];
      if (multipart) {
        const signed = await negotiate('part', { uploadKey, uploadId, partNumber: 1, size: data.length });
        const stored = await fetch(signed.body.request.url, {
          method: 'PUT',
          headers: signed.body.request.headers,
          body: new Uint8Array(data),
        });
        expect(stored.status).toBe(200);
        parts.push({ partNumber: 1, etag: stored.headers.get('etag')! });
      } else {
        const stored = await fetch(start.body.request.url, {
          method: 'PUT',
          headers: start.body.request.headers,
          body: new Uint8Array(data),
        });
        expect(stored.status).toBe(200);
      }
      const complete = await negotiate('complete', { uploadKey, size: data.length, ...(multipart ? { uploadId, parts } : {}) });
      expect(complete.status).toBe(200);
      const { record, retention } = await lockOf(backupId);
      expect(record.status).toBe('UPLOADED');
      expect(retention).toEqual({ Mode: 'GOVERNANCE', RetainUntilDate: new Date(record.lockedUntil!) });
      expect(record.lockedUntil).toBe(record.expiresAt + PLAN_RULES.pro.retentionMs + GRACE_DAYS * DAY_MS);
      expect((await call('POST', `/api/backups/${backupId}/finalize`, { json: finalizeBody(data.length) })).status).toBe(200);
      // The presigned download names the version too.
      const url = await call('GET', `/api/backups/${backupId}/content-url`);
      expect(url.status).toBe(200);
      expect(new URL(url.body.url).searchParams.get('versionId')).toBe(record.blobVersion);
      expect(Buffer.from(await (await fetch(url.body.url)).arrayBuffer()).equals(data)).toBe(true);
    }
  });
});

describe.skipIf(skipEngine('ceph'))('Object Lock on Ceph: the blob host (blobhost-client)', () => {
  let s3: TestS3;
  let bucket: LockBucket;
  let server: TestServer;

  beforeAll(async () => {
    s3 = await startS3('ceph');
    bucket = await lockBucket(s3);
    server = await startTestServer({
      env: { ...bucket.env, COFFER_S3_OBJECT_LOCK: 'governance', COFFER_UPLOAD_PROTOCOL: 'blobhost-client' },
    });
    process.env.VERCEL_BLOB_API_URL = `${server.url}/blob`;
  });
  afterAll(async () => {
    await server?.stop();
    await bucket?.remove(true);
    await s3?.close();
  });

  it('single and multipart uploads through the stock client are locked before the backup becomes UPLOADED', async () => {
    for (const multipart of [false, true]) {
      const { call, apiKey } = await owner(server);
      const created = await call('POST', '/api/backups');
      const { backupId, blobPath, upload: instructions } = created.body;
      const data = randomBytes(multipart ? 6 * 1024 * 1024 : 30_000);
      await upload(blobPath, data, {
        access: 'private',
        handleUploadUrl: instructions.handleUploadUrl,
        headers: { authorization: `Bearer ${apiKey}` },
        contentType: 'application/octet-stream',
        multipart,
      });
      const record = (await server.parts.stores.backups.getBackup(backupId))!;
      expect(record.status).toBe('UPLOADED');
      expect(record.lockedUntil, multipart ? 'multipart' : 'single').toBe(
        record.expiresAt + PLAN_RULES.pro.retentionMs + GRACE_DAYS * DAY_MS,
      );
      const retention = await bucket.client.send(
        new GetObjectRetentionCommand({ Bucket: bucket.name, Key: record.blobKey!, VersionId: record.blobVersion! }),
      );
      expect(retention.Retention).toEqual({ Mode: 'GOVERNANCE', RetainUntilDate: new Date(record.lockedUntil!) });
    }
  });
});

describe.skipIf(skipEngine('ceph'))('Object Lock: the start check', () => {
  let s3: TestS3;
  let bucket: LockBucket;

  beforeAll(async () => {
    s3 = await startS3('ceph');
    bucket = await lockBucket(s3);
  });
  afterAll(async () => {
    await bucket?.remove(true);
    await s3?.close();
  });

  /** The error a server start fails with (one that starts is stopped: null). */
  const startError = (env: Record<string, string>) =>
    startTestServer({ env }).then(
      async (server) => {
        await server.stop();
        return null;
      },
      (error: unknown) => error,
    );

  it('a lock mode on a bucket without Object Lock, or off on a bucket with it, is a clear error', async () => {
    const noLock = await startError({ ...s3.env, COFFER_S3_OBJECT_LOCK: 'governance' });
    expect(noLock).toBeInstanceOf(ConfigError);
    expect((noLock as Error).message).toBe(
      `COFFER_S3_OBJECT_LOCK: the bucket ${s3.bucket} has no Object Lock: COFFER_S3_OBJECT_LOCK=governance needs a bucket ` +
        'created with Object Lock enabled (aws s3api create-bucket --bucket <name> --object-lock-enabled-for-bucket), or set ' +
        'COFFER_S3_OBJECT_LOCK=off',
    );
    const lockOff = await startError(bucket.env);
    expect(lockOff).toBeInstanceOf(ConfigError);
    expect((lockOff as Error).message).toContain(
      `COFFER_S3_OBJECT_LOCK: the bucket ${bucket.name} has Object Lock enabled: set COFFER_S3_OBJECT_LOCK to governance or compliance`,
    );
    // Matching settings start.
    for (const env of [
      { ...s3.env, COFFER_S3_OBJECT_LOCK: 'off' },
      { ...bucket.env, COFFER_S3_OBJECT_LOCK: 'compliance' },
    ]) {
      const server = await startTestServer({ env });
      await server.stop();
    }
  });
});

describe('Object Lock: the filesystem store', () => {
  it('refuses a lock setting: it cannot keep a backup from being deleted', () => {
    for (const mode of ['governance', 'compliance']) {
      expect(() => loadConfig({ COFFER_S3_OBJECT_LOCK: mode })).toThrow(
        'COFFER_S3_OBJECT_LOCK: needs COFFER_BLOB_STORE=s3: the filesystem store cannot keep a backup from being deleted',
      );
    }
    expect(loadConfig({ COFFER_S3_OBJECT_LOCK: 'off' }).s3.objectLock).toBe('off');
    expect(() => loadConfig({ COFFER_BLOB_STORE: 's3', COFFER_S3_BUCKET: 'b', COFFER_S3_OBJECT_LOCK: 'on' })).toThrow(
      'COFFER_S3_OBJECT_LOCK: must be one of off, governance, compliance, got "on"',
    );
  });
});
