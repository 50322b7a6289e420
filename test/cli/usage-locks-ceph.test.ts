/**
 * The operator's view of locked backups through the real path (docs/operations.md#locked-backups): a server on Ceph's
 * RADOS Gateway with COFFER_S3_OBJECT_LOCK=governance on a lock-enabled bucket stores a backup locked; the real
 * `coffer admin backups locked` and `coffer admin usage` show it and until when, and after a delete through the API
 * (which hides the backup and leaves the object) still list it, as a DELETED record still locked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope, finalizeBody } from '../helpers/api.js';
import { lockBucket, skipEngine, startS3, type LockBucket, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertBuilt, json, runCli } from '../client/helpers.js';

describe.skipIf(skipEngine('ceph'))('locked backups as the operator sees them, on Ceph with Object Lock', { timeout: 180_000 }, () => {
  let s3: TestS3;
  let server: TestServer;
  let env: Record<string, string>;
  let bucket: LockBucket;

  beforeAll(async () => {
    assertBuilt();
    s3 = await startS3('ceph');
    bucket = await lockBucket(s3, 'oplock');
    env = { ...bucket.env, COFFER_S3_OBJECT_LOCK: 'governance' };
    server = await startTestServer({ env });
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    await bucket?.remove(true); // governance: the test (never Coffer) may remove locked versions with the bypass
    await s3?.close();
  });

  const admin = (args: string[]) => runCli(['admin', ...args], { ...env, COFFER_DATA_DIR: server.dataDir });

  it('coffer admin backups locked and usage show the lock the store set, before and after a delete', async () => {
    const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
    const call = api(server.url, apiKey);
    expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
    const id = (await call('POST', '/api/backups')).body.backupId as string;
    const uploaded = await call('POST', `/api/backups/upload?backupId=${id}`, {
      body: new Uint8Array(5000).fill(7),
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(uploaded.status).toBe(201);
    expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(5000) })).status).toBe(200);
    const { lockedUntil } = (await server.parts.stores.backups.getBackup(id))!;
    expect(lockedUntil).toBeGreaterThan(Date.now());
    const until = new Date(lockedUntil!).toISOString();

    let listed = json<{ backups: { backupId: string; status: string; lockedUntil: string }[] }>(
      await admin(['backups', 'locked', '--account', accountId, '--json']),
    );
    expect(listed.backups).toEqual([{ backupId: id, accountId, status: 'READY', ciphertextSizeBytes: 5000, lockedUntil: until }]);
    const usageOf = async () =>
      json<{ accounts: Record<string, unknown>[] }>(await admin(['usage', '--json'])).accounts.find((a) => a.accountId === accountId);
    expect(await usageOf()).toMatchObject({ lockedBackups: 1, lockedDeletedBackups: 0, lockedBytes: 5000, lockedUntil: until });

    // Deleting hides the backup; the store keeps its object until the lock ends, and the operator still sees it.
    expect((await call('DELETE', `/api/backups/${id}`)).status).toBe(200);
    listed = json(await admin(['backups', 'locked', '--account', accountId, '--json']));
    expect(listed.backups).toEqual([{ backupId: id, accountId, status: 'DELETED', ciphertextSizeBytes: 5000, lockedUntil: until }]);
    expect(await usageOf()).toMatchObject({ lockedBackups: 0, lockedDeletedBackups: 1, lockedBytes: 5000, lockedUntil: until });
    expect((await admin(['usage'])).stdout).toMatch(
      new RegExp(`^${accountId}\\s.*\\s0 \\(\\+1 deleted\\) until ${until.slice(0, 10)}$`, 'm'),
    );
  });
});
