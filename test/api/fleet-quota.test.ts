/**
 * One budget for an owner and its host accounts (docs/api-rules.md#quota, docs/operations.md#fleets), on a real server
 * (SQLite, then PostgreSQL) with host accounts made the way an owner makes them (POST /console/api/host-accounts) and
 * the operator's changes made with the real `coffer admin` against the server's database while it runs: the owner's
 * quota covers the owner and every host account it made, so their append-only keys store no more than the owner may;
 * quota 0 holds with no plan quota configured; a new host account is refused at the quota; `set-plan` on the owner
 * reaches its host accounts, and a host account's own plan or quota cannot be set; several host accounts uploading at
 * once never take the fleet past its quota (their reservations are taken under the owner's one lock).
 */
import { describe, expect, it } from 'vitest';
import { finalizeBody, slowUpload } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { bytes, createSlot, readyBackup, upload, useServer } from '../helpers/fixture.js';
import { skipPg } from '../helpers/pg.js';
import { runCli } from '../client/helpers.js';
import { signInWithKey } from '../console/helpers.js';

for (const [name, postgres] of [
  ['SQLite', false],
  ['PostgreSQL', true],
] as const)
  // Each step of `coffer admin` is a Node process: generous time on a shared machine.
  describe.skipIf(postgres && skipPg)(`one quota for an owner and its host accounts (${name})`, { timeout: 120_000 }, () => {
    const clock = new ManualClock();
    // No COFFER_QUOTA_<PLAN>: the plans have no quota, only what the operator sets on an account.
    const fixture = useServer({ clock, postgres });

    const admin = (args: string[]) => {
      const { dataDir, parts } = fixture.server;
      return runCli(['admin', ...args], {
        COFFER_DATA_DIR: dataDir,
        ...(parts.config.databaseUrl ? { COFFER_DATABASE_URL: parts.config.databaseUrl } : {}),
      });
    };
    const setQuota = async (accountId: string, quota: string) => {
      const result = await admin(['accounts', 'set-quota', accountId, quota]);
      expect(result.code, result.stderr).toBe(0);
    };

    const signIn = (apiKey: string) => signInWithKey(fixture.server.url, apiKey);
    /** The owner adds a host account in the console, as the reproduction did. */
    const addHost = async (session: { cookie: string; csrf: string }, label: string) => {
      const response = await fetch(`${fixture.server.url}/console/api/host-accounts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: fixture.server.url, cookie: session.cookie, 'x-csrf-token': session.csrf },
        body: JSON.stringify({ label, expiresInDays: null }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, any> };
    };
    const owned = async (count: number) => {
      const owner = await fixture.account({ plan: 'pro' });
      const session = await signIn(owner.apiKey);
      const hosts: { accountId: string; apiKey: string; call: ReturnType<typeof fixture.client> }[] = [];
      for (let i = 0; i < count; i++) {
        const made = await addHost(session, `host-${i}`);
        expect(made.status, JSON.stringify(made.body)).toBe(201);
        hosts.push({ accountId: made.body.accountId, apiKey: made.body.apiKey, call: fixture.client(made.body.apiKey) });
      }
      return { owner, session, hosts };
    };
    const hostList = async (ownerCall: ReturnType<typeof fixture.client>) =>
      ((await ownerCall('GET', '/api/host-accounts')).body.hosts as { accountId: string; backupInterval: string }[]).map(
        (h) => h.backupInterval,
      );

    it("an owner limited to 1,000 bytes stores no more through its host accounts' append-only keys", async () => {
      const { owner, session, hosts } = await owned(2);
      await setQuota(owner.accountId, '1000');
      await readyBackup(owner.call, 600);

      // A host account's upload counts against the owner's quota: 600 more does not fit, 400 does.
      const [web, db] = hosts as [(typeof hosts)[0], (typeof hosts)[0]];
      const slot = await createSlot(web.call);
      const over = await upload(web.call, slot, bytes(600));
      expect(over.status).toBe(413);
      expect(over.body).toMatchObject({ code: 'upload_exceeds_quota', details: { quota: 1000, usage: 600, uploadBytes: 600 } });
      expect((await upload(web.call, slot, bytes(400))).status).toBe(201);
      expect((await web.call('POST', `/api/backups/${slot}/finalize`, { json: finalizeBody(400) })).status).toBe(200);

      // At the quota: no new backup for the other host account nor the owner, and no new host account.
      const refused = await db.call('POST', '/api/backups');
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({ code: 'quota_exceeded', details: { quota: 1000, usage: 1000 } });
      expect(refused.body.message).toMatch(/owner account and its 2 host accounts store 1000 bytes together; their quota is 1000 bytes/);
      clock.advance(31 * 60_000);
      expect((await owner.call('POST', '/api/backups')).body.code).toBe('quota_exceeded');
      const noHost = await addHost(session, 'one-more');
      expect(noHost.status).toBe(409);
      expect(noHost.body).toMatchObject({ code: 'quota_exceeded', details: { quota: 1000, usage: 1000 } });
      expect(noHost.body.message).toMatch(/none is added at the quota/);
      expect(await hostList(owner.call)).toHaveLength(2);
    });

    it('quota 0 on the owner with no plan quota: its host accounts store nothing and no host account is added', async () => {
      const { owner, session, hosts } = await owned(1);
      await setQuota(owner.accountId, '0');
      const refused = await hosts[0]!.call('POST', '/api/backups');
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({ code: 'quota_exceeded', details: { quota: 0, usage: 0 } });
      expect((await addHost(session, 'another')).body).toMatchObject({ code: 'quota_exceeded', details: { quota: 0 } });
      // Lifted on the owner, lifted for the fleet.
      await setQuota(owner.accountId, 'none');
      expect((await hosts[0]!.call('POST', '/api/backups')).status).toBe(201);
      expect((await addHost(session, 'another')).status).toBe(201);
    });

    it("set-plan on the owner reaches its host accounts; a host account's own plan and quota are refused", async () => {
      const { owner, hosts } = await owned(2);
      expect(await hostList(owner.call)).toEqual(['30m', '30m']);
      const changed = await admin(['accounts', 'set-plan', owner.accountId, 'free']);
      expect(changed.code, changed.stderr).toBe(0);
      expect(await hostList(owner.call)).toEqual(['1d', '1d']);
      // The free plan's cadence holds for the host account itself: one backup a day.
      await readyBackup(hosts[0]!.call, 100);
      clock.advance(31 * 60_000);
      expect((await hosts[0]!.call('POST', '/api/backups')).body.code).toBe('backup_cadence_exceeded');

      for (const args of [
        ['set-plan', hosts[1]!.accountId, 'pro'],
        ['set-quota', hosts[1]!.accountId, '5'],
      ]) {
        const refused = await admin(['accounts', ...args]);
        expect(refused.code, args.join(' ')).toBe(1);
        expect(refused.stderr).toContain(`is a host account of ${owner.accountId}`);
        expect(refused.stderr).not.toMatch(/at .*\.js:\d+/);
      }
      expect(await hostList(owner.call)).toEqual(['1d', '1d']);
      expect(await fixture.server.parts.quotas.quota(hosts[1]!.accountId)).toMatchObject({ quota: null });

      expect((await admin(['accounts', 'set-plan', owner.accountId, 'plus'])).code).toBe(0);
      expect(await hostList(owner.call)).toEqual(['4h', '4h']);
    });

    it('several host accounts uploading at once never take the fleet past the owner quota', async () => {
      const { owner, hosts } = await owned(5);
      await setQuota(owner.accountId, '10000');
      const slots = await Promise.all(hosts.map((host) => createSlot(host.call)));
      // Five uploads of 3,000 bytes in flight together (each pauses half-way): three fit, two do not.
      const responses = await Promise.all(
        hosts.map((host, i) => slowUpload(fixture.server.url, host.apiKey, slots[i]!, bytes(3000, i), 400)),
      );
      expect(responses.map((r) => r.status).sort()).toEqual([201, 201, 201, 413, 413]);
      for (const refused of responses.filter((r) => r.status === 413)) {
        expect(refused.body).toMatchObject({ code: 'upload_exceeds_quota', details: { quota: 10_000, usage: 9000, uploadBytes: 3000 } });
      }
      // What the fleet stores: the three uploads, nothing reserved is left over.
      expect(await fixture.server.parts.quotas.quota(owner.accountId)).toEqual({ quota: 10_000, usage: 9000 });
    });
  });
