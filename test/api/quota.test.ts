/** Storage quotas (docs/api-rules.md#quota): refused on create at the quota, on upload past it, and under races. */
import { describe, expect, it } from 'vitest';
import { api, finalizeBody, slowUpload } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { bytes, createSlot, readyBackup, upload, useServer } from '../helpers/fixture.js';

const clock = new ManualClock(Date.now());
const fx = useServer({ clock, env: { COFFER_QUOTA_PRO: '10000' } });
const next = () => clock.advance(31 * 60_000);

describe('storage quota', () => {
  it('refuses an upload past the quota with 413 before storing it, and a create at the quota with 409', async () => {
    const { call, accountId } = await fx.account({ plan: 'pro' });
    await readyBackup(call, 6000);
    next();
    const id = await createSlot(call);
    const over = await upload(call, id, bytes(5000));
    expect(over.status).toBe(413);
    expect(over.body).toMatchObject({ code: 'upload_exceeds_quota', details: { quota: 10_000, usage: 6000, uploadBytes: 5000 } });
    expect((await fx.server.parts.stores.backups.getBackup(id))!.status).toBe('PENDING_UPLOAD');
    expect(await fx.server.parts.quotas.quota(accountId)).toEqual({ quota: 10_000, usage: 6000 });

    expect((await upload(call, id, bytes(4000))).status).toBe(201);
    expect((await call('POST', `/api/backups/${id}/finalize`, { json: finalizeBody(4000) })).status).toBe(200);
    next();
    const refused = await call('POST', '/api/backups');
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'quota_exceeded', details: { quota: 10_000, usage: 10_000 } });
    expect(refused.body.resolution).toMatch(/delete backups/);

    // An account's own quota replaces the plan's: none lifts it, a number sets it, undefined returns to the plan's.
    await fx.server.parts.quotas.setQuota(accountId, null);
    expect((await call('POST', '/api/backups')).status).toBe(201);
    await fx.server.parts.quotas.setQuota(accountId, 10_001);
    expect(await fx.server.parts.quotas.quota(accountId)).toEqual({ quota: 10_001, usage: 10_000 });
  });

  it("the owners' console shows the stored bytes against the plan's quota (and the upload in progress counts)", async () => {
    const { call, accountId } = await fx.account({ plan: 'pro' });
    await readyBackup(call, 3000);
    const token = (await fx.server.parts.sessions.createLoginLink(accountId))!.token;
    const signIn = await api(fx.server.url)('POST', '/console/api/session', {
      json: { loginToken: token },
      headers: { origin: fx.server.url },
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    const overview = async () =>
      (await api(fx.server.url)('GET', '/console/api/overview', { headers: { cookie } })).body as { storage: unknown };
    expect((await overview()).storage).toEqual({ storedBytes: 3000, quotaBytes: 10_000 });
    next();
    const id = await createSlot(call);
    expect((await upload(call, id, bytes(2000))).status).toBe(201); // UPLOADED, not finalized: it counts
    expect((await overview()).storage).toEqual({ storedBytes: 5000, quotaBytes: 10_000 });
    await fx.server.parts.quotas.setQuota(accountId, null);
    expect((await overview()).storage).toEqual({ storedBytes: 5000, quotaBytes: null });
  });

  it('a body of unknown length is cut at what is left: 413, nothing recorded', async () => {
    const { call } = await fx.account({ plan: 'pro' });
    await readyBackup(call, 8000);
    next();
    const id = await createSlot(call);
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new Uint8Array(bytes(3000)));
        controller.close();
      },
    });
    const response = await call('POST', `/api/backups/upload?backupId=${id}`, {
      body: chunked,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(response.status).toBe(413);
    expect(response.body).toMatchObject({ code: 'upload_exceeds_quota', details: { quota: 10_000, usage: 8000 } });
    expect((await fx.server.parts.stores.backups.getBackup(id))!.status).toBe('PENDING_UPLOAD');
  });

  it('two concurrent uploads that each fit but not together: one 201, one 413 (the database reserves the bytes)', async () => {
    for (let round = 0; round < 3; round++) {
      const { apiKey, call, accountId } = await fx.account({ plan: 'pro' });
      const id = await createSlot(call);
      const responses = await Promise.all([
        slowUpload(fx.server.url, apiKey, id, bytes(6000, 1), 400),
        slowUpload(fx.server.url, apiKey, id, bytes(6000, 2), 400),
      ]);
      expect(responses.map((r) => r.status).sort()).toEqual([201, 413]);
      expect(responses.find((r) => r.status === 413)!.body).toMatchObject({ code: 'upload_exceeds_quota', details: { usage: 6000 } });
      // The reservations ended: what counts now is the stored upload only.
      expect(await fx.server.parts.quotas.quota(accountId)).toEqual({ quota: 10_000, usage: 6000 });
    }
  });
});
