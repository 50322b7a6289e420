/**
 * The storage quota on the blobhost-client blob host's multipart uploads (docs/api-rules.md#quota), over real HTTP:
 * a part whose declared length would take the account past its quota is refused with 413 upload_exceeds_quota
 * before it is stored, one of unknown length is cut where the quota ends, and two parts stored at the same time
 * that each fit but not together are not both kept. A refused part's upload is discarded (as for the archive limit).
 * A single PUT is held to it the same way.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, envelope } from '../helpers/api.js';
import { type S3Engine, S3_ENGINES, skipEngine, startS3, type TestS3 } from '../helpers/s3.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const KiB = 1024;
const QUOTA = 1000 * KiB;

const stores: { name: string; s3?: S3Engine }[] = [{ name: 'fs' }, ...S3_ENGINES.map((engine) => ({ name: `s3 (${engine})`, s3: engine }))];

for (const store of stores)
  describe.skipIf(store.s3 !== undefined && skipEngine(store.s3))(
    `blobhost-client multipart uploads against the storage quota: ${store.name}`,
    () => {
      let server: TestServer;
      let s3: TestS3 | undefined;

      beforeAll(async () => {
        if (store.s3) s3 = await startS3(store.s3);
        server = await startTestServer({ env: { ...s3?.env, COFFER_UPLOAD_PROTOCOL: 'blobhost-client', COFFER_QUOTA_PRO: String(QUOTA) } });
      });
      afterAll(async () => {
        await server?.stop();
        await s3?.close();
      });

      /** A new pro account with a vault, an open slot, a client token for it and one multipart upload created. */
      async function slot() {
        const { apiKey, accountId } = await server.newKey({ plan: 'pro' });
        const call = api(server.url, apiKey);
        expect((await call('POST', '/api/backup-account/bootstrap', { json: envelope() })).status).toBe(200);
        const { backupId, blobPath } = (await call('POST', '/api/backups')).body as { backupId: string; blobPath: string };
        const handshake = await call('POST', '/api/backups/upload', {
          json: { type: 'blob.generate-client-token', payload: { pathname: blobPath, clientPayload: null, multipart: true } },
        });
        expect(handshake.status).toBe(200);
        const token = handshake.body.clientToken as string;
        const mpu = (action: string, headers: Record<string, string> = {}, body?: BodyInit) =>
          api(server.url)('POST', `/blob/mpu?pathname=${encodeURIComponent(blobPath)}`, {
            headers: { authorization: `Bearer ${token}`, 'x-mpu-action': action, ...headers },
            body,
          });
        const created = await mpu('create');
        expect(created.status).toBe(200);
        const upload = created.body as { key: string; uploadId: string };
        const part = (partNumber: number, body: BodyInit) =>
          mpu(
            'upload',
            { 'x-mpu-key': encodeURIComponent(upload.key), 'x-mpu-upload-id': upload.uploadId, 'x-mpu-part-number': String(partNumber) },
            body,
          );
        const put = (body: BodyInit) =>
          api(server.url)('PUT', `/blob/?pathname=${encodeURIComponent(blobPath)}`, {
            headers: { authorization: `Bearer ${token}` },
            body,
          });
        return { accountId, backupId, call, part, put };
      }

      /** `size` bytes as a chunked body (no Content-Length): only counting while it streams can stop it. */
      function chunked(size: number): ReadableStream<Uint8Array> {
        let sent = 0;
        return new ReadableStream({
          pull(controller) {
            if (sent >= size) return controller.close();
            const chunk = randomBytes(Math.min(64 * KiB, size - sent));
            sent += chunk.length;
            controller.enqueue(chunk);
          },
        });
      }

      const refusals = () => server.parts.quotas.quotaRefusals.upload;

      it('a part whose declared length does not fit is refused before it is stored: 413 upload_exceeds_quota, upload discarded', async () => {
        const s = await slot();
        expect((await s.part(1, randomBytes(400 * KiB))).status).toBe(200);
        expect((await s.part(2, randomBytes(400 * KiB))).status).toBe(200);
        const before = refusals();
        const over = await s.part(3, randomBytes(300 * KiB));
        expect(over.status).toBe(413);
        expect(over.body).toMatchObject({
          error: { code: 'upload_exceeds_quota', details: { quota: QUOTA, usage: 800 * KiB, uploadBytes: 300 * KiB } },
        });
        expect(over.body.error.message).toMatch(/does not fit in the quota/);
        expect(refusals()).toBe(before + 1);
        expect(await server.parts.stores.multipart.slotBytes(s.backupId)).toBe(0);
        expect((await s.call('GET', `/api/backups/${s.backupId}`)).body.status).toBe('PENDING_UPLOAD');
      });

      it("the account's own quota applies: a part of unknown length is cut where it ends", async () => {
        const s = await slot();
        await server.parts.quotas.setQuota(s.accountId, 300 * KiB);
        expect((await s.part(1, randomBytes(200 * KiB))).status).toBe(200);
        const over = await s.part(2, chunked(200 * KiB));
        expect(over.status).toBe(413);
        expect(over.body).toMatchObject({ error: { code: 'upload_exceeds_quota', details: { quota: 300 * KiB, usage: 200 * KiB } } });
        expect(await server.parts.stores.multipart.slotBytes(s.backupId)).toBe(0);
        await server.parts.quotas.setQuota(s.accountId, undefined);
      });

      it('two parts at once that each fit but not together are not both kept', async () => {
        for (let round = 0; round < 3; round++) {
          const s = await slot();
          const answers = await Promise.all([s.part(1, randomBytes(600 * KiB)), s.part(2, randomBytes(600 * KiB))]);
          expect(answers.map((a) => a.status)).toContain(413);
          for (const answer of answers.filter((a) => a.status === 413)) {
            expect(answer.body.error.code).toBe('upload_exceeds_quota');
          }
          expect(await server.parts.stores.multipart.slotBytes(s.backupId)).toBeLessThanOrEqual(QUOTA);
        }
      });

      it('a single PUT is held to the quota too: refused before storing by its length, cut when it has none', async () => {
        const s = await slot();
        await server.parts.quotas.setQuota(s.accountId, 100 * KiB);
        const declared = await s.put(randomBytes(101 * KiB));
        expect(declared.status).toBe(413);
        expect(declared.body).toMatchObject({
          error: { code: 'upload_exceeds_quota', details: { quota: 100 * KiB, usage: 0, uploadBytes: 101 * KiB } },
        });
        const streamed = await s.put(chunked(101 * KiB));
        expect(streamed.status).toBe(413);
        expect(streamed.body.error.code).toBe('upload_exceeds_quota');
        expect((await s.call('GET', `/api/backups/${s.backupId}`)).body.status).toBe('PENDING_UPLOAD');
        const fits = await s.put(randomBytes(100 * KiB));
        expect(fits.status).toBe(200);
        expect((await s.call('GET', `/api/backups/${s.backupId}`)).body).toMatchObject({
          status: 'UPLOADED',
          ciphertextSizeBytes: 100 * KiB,
        });
        expect((await server.parts.quotas.quota(s.accountId))!.usage).toBe(100 * KiB);
      });

      it('without a quota, parts are held to the archive limit only', async () => {
        const s = await slot();
        await server.parts.quotas.setQuota(s.accountId, null);
        for (const n of [1, 2, 3]) expect((await s.part(n, randomBytes(400 * KiB))).status).toBe(200);
        expect(await server.parts.stores.multipart.slotBytes(s.backupId)).toBe(1200 * KiB);
      });
    },
  );
