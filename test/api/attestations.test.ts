/**
 * Restore attestations over HTTP on a real port (docs/api-rules.md#attestations), on SQLite and PostgreSQL: a drill's
 * attestation is recorded for a READY backup the key may read and comes back as sent from the backup's list and the
 * account-wide list, newest first; another account's backup is 404 and a write-only host key 403, with nothing stored;
 * hostile bodies are 400 naming the member, with nothing stored; a backup keeps its newest 20; a backup that is not
 * READY is 409; an owner records and reads its host accounts' attestations, a host never its owner's; the console
 * session lists them like a key; attestations of a deleted backup are no longer shown.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DRILL_CHECKS } from '../../src/contract/attestation.js';
import { ManualClock } from '../helpers/clock.js';
import { type Call, bytes, createSlot, readyBackup, upload, useServer } from '../helpers/fixture.js';
import { skipPg } from '../helpers/pg.js';
import { signInWithKey } from '../console/helpers.js';

const DRILL_KEY = randomBytes(32);

/** A payload as a drilling client writes it (docs/crypto.md#restore-attestations), with `changes` on top. */
function payloadFor(backup: { id: string; accountId: string }, changes: Record<string, unknown> = {}) {
  return {
    format: 'coffer-attestation/v1',
    accountId: backup.accountId,
    backupId: backup.id,
    checkedAt: '2026-11-28T22:00:00.000Z',
    result: 'passed',
    failure: null,
    checks: [...DRILL_CHECKS],
    ciphertextSizeBytes: 1000,
    ciphertextSha256: 'ab'.repeat(32),
    plaintextSizeBytes: 900,
    fileCount: 3,
    vaultKey: '0123456789abcdef',
    drilledBy: { machine: 'drill-host', client: 'coffer-cli/0.1.0' },
    ...changes,
  };
}

/** The request body: the payload's bytes and their HMAC (the server never checks the mac). */
function bodyOf(payload: unknown | Buffer) {
  const bytesOf = Buffer.isBuffer(payload) ? payload : Buffer.from(JSON.stringify(payload));
  return { payload: bytesOf.toString('base64'), mac: createHmac('sha256', DRILL_KEY).update(bytesOf).digest('base64') };
}

/** Base64 of the payload (padded with spaces to leave 4 unused bits) with one of those bits set: decodes alike, not canonical. */
function nonCanonical(payload: unknown): string {
  let text = JSON.stringify(payload);
  while (Buffer.byteLength(text) % 3 !== 1) text += ' ';
  const canonical = Buffer.from(text).toString('base64');
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const last = canonical.at(-3)!;
  const changed = `${canonical.slice(0, -3)}${alphabet[alphabet.indexOf(last) + 1]}==`;
  if (!Buffer.from(changed, 'base64').equals(Buffer.from(text))) throw new Error('not the same bytes');
  return changed;
}

for (const [name, postgres] of [
  ['SQLite', false],
  ['PostgreSQL', true],
] as const)
  describe.skipIf(postgres && skipPg)(`restore attestations (${name})`, { timeout: 120_000 }, () => {
    const clock = new ManualClock(Date.now());
    const fx = useServer({ clock, postgres });

    const stored = (backupId: string) => fx.server.parts.stores.attestations.listBackupAttestations(backupId, 100);
    const attest = (call: Call, backupId: string, body: unknown) => call('POST', `/api/backups/${backupId}/attestations`, { json: body });

    /** A pro account with a vault, a READY backup, and a key (all scopes) whose id is known. */
    async function drilled() {
      const owner = await fx.account({ plan: 'pro' });
      const backup = await readyBackup(owner.call, 1000);
      const key = await fx.server.newKey({ accountId: owner.accountId, scopes: ['backups:read'] });
      return { ...owner, backup: { id: backup.id, accountId: owner.accountId }, reader: fx.client(key.apiKey), readerKeyId: key.keyId };
    }

    it('records an attestation of a READY backup and lists it as sent, from the backup and the account', async () => {
      const { call, reader, readerKeyId, backup } = await drilled();
      // Members a later version may add are kept: the payload is stored byte for byte.
      const body = bodyOf(payloadFor(backup, { result: 'failed', failure: 'the archive’s SHA-256 does not match', later: { x: 1 } }));
      const recorded = await attest(reader, backup.id, body);
      expect(recorded.status, recorded.text).toBe(201);
      expect(recorded.body).toEqual({
        id: expect.any(String),
        accountId: backup.accountId,
        backupId: backup.id,
        recordedAt: new Date(clock.now()).toISOString(),
        recordedByKeyId: readerKeyId,
        checkedAt: '2026-11-28T22:00:00.000Z',
        result: 'failed',
        payload: body.payload,
        mac: body.mac,
      });
      clock.advance(1000);
      const offset = await attest(call, backup.id, bodyOf(payloadFor(backup, { checkedAt: '2026-11-28T23:30:00+01:00' })));
      expect(offset.status, offset.text).toBe(400); // UTC only, as docs/crypto.md#restore-attestations writes it
      const second = await attest(call, backup.id, bodyOf(payloadFor(backup, { checkedAt: '2026-11-28T22:30:00Z' })));
      expect(second.status, second.text).toBe(201);
      expect(second.body.checkedAt).toBe('2026-11-28T22:30:00.000Z');

      const listed = await call('GET', `/api/backups/${backup.id}/attestations`);
      expect(listed.status).toBe(200);
      expect(listed.body.attestations).toEqual([second.body, recorded.body]);
      const all = await reader('GET', '/api/attestations');
      expect(all.status).toBe(200);
      expect(all.body.attestations).toEqual([second.body, recorded.body]);
      expect((await reader('GET', '/api/attestations?limit=1')).body.attestations).toEqual([second.body]);
      const payload = JSON.parse(Buffer.from(recorded.body.payload, 'base64').toString('utf8'));
      expect(payload.later).toEqual({ x: 1 });
    });

    it('another account’s backup, an unknown id and a malformed one are 404 and store nothing', async () => {
      const { backup } = await drilled();
      const stranger = await fx.account({ plan: 'pro' });
      for (const id of [backup.id, '0190aaaa-0000-7000-8000-000000000000', 'not-a-uuid']) {
        const refused = await attest(stranger.call, id, bodyOf(payloadFor({ id, accountId: stranger.accountId })));
        expect(refused.status, refused.text).toBe(404);
        expect(refused.body.code).toBe('backup_not_found');
      }
      // Even a payload naming the other account's backup correctly.
      const named = await attest(stranger.call, backup.id, bodyOf(payloadFor(backup)));
      expect(named.status).toBe(404);
      expect((await stranger.call('GET', `/api/backups/${backup.id}/attestations`)).status).toBe(404);
      expect(await stored(backup.id)).toEqual([]);
      expect((await stranger.call('GET', '/api/attestations')).body.attestations).toEqual([]);
    });

    it('hostile bodies are 400 naming the member, and store nothing', async () => {
      const { reader, backup } = await drilled();
      const good = bodyOf(payloadFor(backup));
      const mac31 = randomBytes(31).toString('base64');
      const cases: [string, unknown, string][] = [
        ['payload not base64', { ...good, payload: '!!!!' }, 'payload'],
        ['payload base64 without padding', { ...good, payload: good.payload.replace(/=+$/, '') }, 'payload'],
        ['a valid payload in base64 with a non-zero unused bit', { ...good, payload: nonCanonical(payloadFor(backup)) }, 'payload'],
        ['a valid payload over 4096 bytes', bodyOf(Buffer.from(JSON.stringify(payloadFor(backup)).padEnd(4097))), 'payload'],
        ['an empty payload', { ...good, payload: '' }, 'payload'],
        ['a payload that is not UTF-8', bodyOf(Buffer.from([0x7b, 0xff, 0x7d])), 'payload'],
        ['a payload with a byte-order mark', bodyOf(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}')])), 'payload'],
        ['a payload that is not JSON', bodyOf(Buffer.from('hello')), 'payload'],
        ['a JSON array', bodyOf([payloadFor(backup)]), 'payload'],
        ['another format', bodyOf(payloadFor(backup, { format: 'coffer-attestation/v2' })), 'payload.format'],
        ['a result it does not know', bodyOf(payloadFor(backup, { result: 'maybe' })), 'payload.result'],
        [
          'a machine name too long',
          bodyOf(payloadFor(backup, { drilledBy: { machine: 'm'.repeat(256), client: 'c' } })),
          'payload.drilledBy.machine',
        ],
        ['another backup', bodyOf(payloadFor({ ...backup, id: '0190aaaa-0000-7000-8000-000000000000' })), 'payload.backupId'],
        ['the backup id in capitals', bodyOf(payloadFor({ ...backup, id: backup.id.toUpperCase() })), 'payload.backupId'],
        ['another account', bodyOf(payloadFor({ ...backup, accountId: '0190aaaa-0000-7000-8000-000000000000' })), 'payload.accountId'],
        ['a checkedAt that is no instant', bodyOf(payloadFor(backup, { checkedAt: '2026-02-30T00:00:00Z' })), 'payload.checkedAt'],
        ['a checkedAt without a zone', bodyOf(payloadFor(backup, { checkedAt: '2026-11-28T22:00:00' })), 'payload.checkedAt'],
        ['a mac of 31 bytes', { ...good, mac: mac31 }, 'mac'],
        ['a mac of 33 bytes', { ...good, mac: randomBytes(33).toString('base64') }, 'mac'],
        ['no mac', { payload: good.payload }, 'mac'],
        ['an unknown member', { ...good, extra: 1 }, 'extra'],
        ['not an object', [good], ''],
      ];
      for (const [what, body, path] of cases) {
        const refused = await attest(reader, backup.id, body);
        expect(refused.status, `${what}: ${refused.text}`).toBe(400);
        expect(refused.body.code, what).toBe('validation_failed');
        expect(refused.text, what).not.toMatch(/at .*\.[jt]s:\d+/);
        if (path !== '') expect(refused.body.details.issues[0].path, what).toBe(path);
      }
      const notJson = await reader('POST', `/api/backups/${backup.id}/attestations`, {
        body: '{"payload":',
        headers: { 'content-type': 'application/json' },
      });
      expect(notJson.status).toBe(400);
      expect(notJson.body.code).toBe('invalid_json');
      expect(await stored(backup.id)).toEqual([]);
      expect((await attest(reader, backup.id, good)).status).toBe(201);
      const longest = await attest(reader, backup.id, bodyOf(Buffer.from(JSON.stringify(payloadFor(backup)).padEnd(4096))));
      expect(longest.status, longest.text).toBe(201);
    });

    it('a backup keeps its newest 20: the 21st removes the oldest of that backup only', async () => {
      const { call, backup } = await drilled();
      clock.advance(31 * 60_000);
      const other = await readyBackup(call, 500, 3);
      expect((await attest(call, other.id, bodyOf(payloadFor({ id: other.id, accountId: backup.accountId })))).status).toBe(201);
      const ids: string[] = [];
      for (let i = 0; i < 21; i++) {
        clock.advance(1);
        const recorded = await attest(call, backup.id, bodyOf(payloadFor(backup, { fileCount: i })));
        expect(recorded.status, recorded.text).toBe(201);
        ids.push(recorded.body.id);
      }
      const listed = (await call('GET', `/api/backups/${backup.id}/attestations`)).body.attestations as { id: string }[];
      expect(listed.map((a) => a.id)).toEqual(ids.slice(1).reverse());
      expect((await stored(backup.id)).map((a) => a.id)).toEqual(ids.slice(1).reverse());
      expect(await stored(other.id)).toHaveLength(1);
      const all = (await call('GET', '/api/attestations')).body.attestations as { backupId: string }[];
      expect(all).toHaveLength(21);
      expect(all.at(-1)!.backupId).toBe(other.id);
    });

    it('a backup that is not READY is 409 invalid_backup_state, and nothing is stored', async () => {
      const owner = await fx.account({ plan: 'pro' });
      const slot = await createSlot(owner.call);
      const pending = await attest(owner.call, slot, bodyOf(payloadFor({ id: slot, accountId: owner.accountId })));
      expect(pending.status, pending.text).toBe(409);
      expect(pending.body).toMatchObject({ code: 'invalid_backup_state', details: { status: 'PENDING_UPLOAD' } });
      expect((await upload(owner.call, slot, bytes(100))).status).toBe(201);
      const uploaded = await attest(owner.call, slot, bodyOf(payloadFor({ id: slot, accountId: owner.accountId })));
      expect(uploaded.status).toBe(409);
      expect(uploaded.body.details.status).toBe('UPLOADED');
      expect(await stored(slot)).toEqual([]);
    });

    it('a write-only host key is 403 and stores nothing; an owner records and reads its hosts’, a host never its owner’s', async () => {
      const owner = await drilled();
      const host = await fx.server.parts.keys.addHost(owner.accountId, { label: `web-${name}` });
      const hostCall = fx.client(host.apiKey);
      const hostBackup = { id: (await readyBackup(hostCall, 700, 5)).id, accountId: host.key.accountId };
      const refused = await attest(hostCall, hostBackup.id, bodyOf(payloadFor(hostBackup)));
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ code: 'insufficient_scope', details: { requiredPermission: 'backups:read' } });
      expect((await hostCall('GET', '/api/attestations')).status).toBe(403);
      expect(await stored(hostBackup.id)).toEqual([]);

      // The owner's key drills the host's backup: stored under the host account, which the payload must name.
      const wrongAccount = await attest(owner.call, hostBackup.id, bodyOf(payloadFor({ ...hostBackup, accountId: owner.accountId })));
      expect(wrongAccount.status).toBe(400);
      clock.advance(1);
      const byOwner = await attest(owner.call, hostBackup.id, bodyOf(payloadFor(hostBackup)));
      expect(byOwner.status, byOwner.text).toBe(201);
      expect(byOwner.body.accountId).toBe(hostBackup.accountId);
      // An append-only host key that may read records for its own backups.
      const hostAccount = (await fx.server.parts.stores.accounts.getAccount(hostBackup.accountId))!;
      const drillKey = await fx.server.parts.keys.issueKey(hostAccount, { scopes: ['backups:read', 'backups:write'], appendOnly: true });
      const hostDrill = fx.client(drillKey.apiKey);
      clock.advance(1);
      const byHost = await attest(hostDrill, hostBackup.id, bodyOf(payloadFor(hostBackup)));
      expect(byHost.status, byHost.text).toBe(201);
      clock.advance(1);
      const own = await attest(owner.call, owner.backup.id, bodyOf(payloadFor(owner.backup)));

      const ownerList = (await owner.call('GET', '/api/attestations')).body.attestations;
      expect(ownerList).toEqual([own.body, byHost.body, byOwner.body]);
      expect((await owner.call('GET', `/api/backups/${hostBackup.id}/attestations`)).body.attestations).toEqual([
        byHost.body,
        byOwner.body,
      ]);
      // The host reads its own and nothing of its owner's.
      expect((await hostDrill('GET', '/api/attestations')).body.attestations).toEqual([byHost.body, byOwner.body]);
      expect((await hostDrill('GET', `/api/backups/${owner.backup.id}/attestations`)).status).toBe(404);
      expect((await attest(hostDrill, owner.backup.id, bodyOf(payloadFor(owner.backup)))).status).toBe(404);
      // An append-only key of the owner reads only the owner's own (as for the backups themselves).
      const appendOnly = await fx.server.parts.keys.issueKey((await fx.server.parts.stores.accounts.getAccount(owner.accountId))!, {
        scopes: ['backups:read'],
        appendOnly: true,
      });
      expect((await fx.client(appendOnly.apiKey)('GET', '/api/attestations')).body.attestations).toEqual([own.body]);
      expect((await attest(fx.client(appendOnly.apiKey), hostBackup.id, bodyOf(payloadFor(hostBackup)))).status).toBe(404);

      // The console session lists them as the owner's key does.
      const session = await signInWithKey(fx.server.url, owner.apiKey);
      const viaSession = await fetch(`${fx.server.url}/api/attestations`, { headers: { cookie: session.cookie } });
      expect(viaSession.status).toBe(200);
      expect(((await viaSession.json()) as { attestations: unknown[] }).attestations).toEqual(ownerList);
    });

    it('limit is 1 to 1000; attestations of a deleted backup are no longer shown', async () => {
      const { call, backup } = await drilled();
      for (const limit of ['0', '1001', '-1', 'x', '1.5', '99999999']) {
        const refused = await call('GET', `/api/attestations?limit=${limit}`);
        expect(refused.status, limit).toBe(400);
        expect(refused.body.code).toBe('validation_failed');
      }
      expect((await call('GET', '/api/attestations?limit=1000')).status).toBe(200);
      expect((await attest(call, backup.id, bodyOf(payloadFor(backup)))).status).toBe(201);
      expect((await call('GET', '/api/attestations')).body.attestations).toHaveLength(1);
      expect((await call('DELETE', `/api/backups/${backup.id}`)).status).toBe(200);
      expect((await call('GET', '/api/attestations')).body.attestations).toEqual([]);
      expect((await call('GET', `/api/backups/${backup.id}/attestations`)).status).toBe(404);
    });
  });
