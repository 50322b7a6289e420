/**
 * The SDK's restore attestations (CofferClient.recordAttestation, listAttestations) against the real server on a real
 * port: a drill's signed attestation is recorded and comes back from both lists, and verifies with the vault's keys;
 * then against a hostile server (a loopback HTTP server answering what a Coffer server never does): answers that are
 * not attestation lists, an attestation of another backup in one backup's list, a recorded answer holding other
 * bytes than those sent. Each is refused with a clear error; extra members the server adds are dropped.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CofferClient,
  CofferNetworkError,
  IntegrityError,
  nodePlatform,
  signAttestation,
  verifyAttestation,
  type DrillOutcome,
} from '../../src/client/index.js';
import { newKey } from '../../src/client/envelope.js';
import { readyBackup, useServer } from '../helpers/fixture.js';

const p = nodePlatform.primitives;

function drillOf(accountId: string, backupId: string, result: 'passed' | 'failed' = 'passed'): DrillOutcome {
  return {
    accountId,
    backupId,
    checkedAt: new Date('2026-11-28T22:00:00.000Z'),
    result,
    failure: result === 'passed' ? null : 'the archive’s SHA-256 does not match its metadata',
    checks: result === 'passed' ? ['download', 'decrypt', 'decompress', 'archive', 'sizes', 'sha256'] : ['download'],
    ciphertextSizeBytes: 1000,
    ciphertextSha256: 'ab'.repeat(32),
    plaintextSizeBytes: 900,
    fileCount: 3,
    drilledBy: { machine: 'drill-host', client: 'coffer-cli/0.1.0' },
  };
}

describe('CofferClient attestations on the real server', { timeout: 120_000 }, () => {
  const fx = useServer();

  it('records a signed attestation and lists it from the backup and the account; each verifies with the ring', async () => {
    const { call, apiKey, accountId } = await fx.account({ plan: 'pro' });
    const backup = await readyBackup(call, 1000);
    const client = new CofferClient({ baseUrl: fx.server.url, apiKey });
    const [older, current] = [newKey(), newKey()];

    const first = signAttestation(p, older, drillOf(accountId, backup.id, 'failed'));
    const second = signAttestation(p, current, drillOf(accountId, backup.id));
    const recorded = await client.recordAttestation(backup.id, first);
    expect(recorded).toMatchObject({ accountId, backupId: backup.id, result: 'failed', ...first });
    await client.recordAttestation(backup.id, second);

    const ofBackup = await client.listAttestations(backup.id);
    const ofAccount = await client.listAttestations(undefined, { limit: 10 });
    expect(ofAccount).toEqual(ofBackup);
    expect(ofBackup.attestations.map((shown) => shown.mac)).toEqual([second.mac, first.mac]);
    const verdicts = ofBackup.attestations.map((shown) => verifyAttestation(p, [current, older], shown));
    expect(verdicts.map((verdict) => verdict.status)).toEqual(['verified', 'verified']);
    expect(verifyAttestation(p, [current], ofBackup.attestations[1]!).status).toBe('forged');
  });

  it("the server's refusals come through as its errors (another account's backup: not found)", async () => {
    const owner = await fx.account({ plan: 'pro' });
    const stranger = await fx.account({ plan: 'pro' });
    const backup = await readyBackup(owner.call, 1000);
    const client = new CofferClient({ baseUrl: fx.server.url, apiKey: stranger.apiKey });
    const body = signAttestation(p, newKey(), drillOf(stranger.accountId, backup.id));
    await expect(client.recordAttestation(backup.id, body)).rejects.toMatchObject({ status: 404, code: 'backup_not_found' });
    await expect(client.listAttestations(backup.id)).rejects.toMatchObject({ status: 404 });
    expect((await new CofferClient({ baseUrl: fx.server.url, apiKey: owner.apiKey }).listAttestations(backup.id)).attestations).toEqual([]);
  });

  it('refuses a limit that is no positive integer before asking', async () => {
    const client = new CofferClient({ baseUrl: fx.server.url, apiKey: 'unused' });
    for (const limit of [0, -1, 1.5, Number.NaN]) await expect(client.listAttestations(undefined, { limit })).rejects.toThrow(RangeError);
  });
});

describe('CofferClient attestations against a hostile server', () => {
  const backupId = '01a2008c-0000-7000-8000-000000000001';
  const accountId = 'a77e5700-0000-4000-8000-0000000000a1';
  const key = newKey();
  const sent = signAttestation(p, key, drillOf(accountId, backupId));
  const shown = {
    id: 'a77e5700-0000-4000-8000-0000000000e1',
    accountId,
    backupId,
    recordedAt: '2026-11-28T22:00:01.000Z',
    recordedByKeyId: 'key',
    checkedAt: '2026-11-28T22:00:00.000Z',
    result: 'passed',
    ...sent,
  };
  let answer: unknown;
  let server: http.Server;
  let client: CofferClient;

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(request.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new CofferClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'k', maxRetries: 0 });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('refuses answers that are not attestation lists, naming what is missing', async () => {
    const unusable: [unknown, RegExp][] = [
      [null, /no attestations list/],
      [[], /no attestations list/],
      [{ attestations: {} }, /no attestations list/],
      [{ attestations: [1] }, /not an object/],
      [{ attestations: [{ ...shown, mac: undefined }] }, /no mac/],
      [{ attestations: [{ ...shown, payload: 7 }] }, /no payload/],
      [{ attestations: [{ ...shown, result: 'PASSED' }] }, /no result/],
      [{ attestations: [shown, { ...shown, checkedAt: null }] }, /no checkedAt/],
    ];
    for (const [body, reason] of unusable) {
      answer = body;
      await expect(client.listAttestations(), JSON.stringify(body)).rejects.toThrow(CofferNetworkError);
      await expect(client.listAttestations(backupId)).rejects.toThrow(reason);
    }
  });

  it("refuses one backup's list holding an attestation shown under another backup", async () => {
    answer = { attestations: [shown, { ...shown, backupId: '01a2008c-0000-7000-8000-000000000002' }] };
    await expect(client.listAttestations(backupId)).rejects.toThrow(IntegrityError);
    await expect(client.listAttestations(backupId)).rejects.toThrow(
      /attestation of backup "01a2008c-0000-7000-8000-000000000002" when asked for/,
    );
    // The account-wide list holds many backups: it is given as shown, and each verdict is verifyAttestation's.
    expect((await client.listAttestations()).attestations).toHaveLength(2);
  });

  it('keeps only the members of the contract, and leaves the verdict to verifyAttestation', async () => {
    answer = { attestations: [{ ...shown, result: 'failed', injected: '<script>' }], more: true };
    const { attestations } = await client.listAttestations(backupId);
    expect(Object.keys(attestations[0]!).sort()).toEqual(Object.keys(shown).sort());
    expect(verifyAttestation(p, [key], attestations[0]!).status).toBe('mismatch');
  });

  it('refuses a recorded answer of another backup, or holding other bytes than those sent', async () => {
    answer = { ...shown, backupId: '01a2008c-0000-7000-8000-000000000002' };
    await expect(client.recordAttestation(backupId, sent)).rejects.toThrow(IntegrityError);
    answer = { ...shown, mac: signAttestation(p, newKey(), drillOf(accountId, backupId)).mac };
    await expect(client.recordAttestation(backupId, sent)).rejects.toThrow(/recorded another attestation than the one sent/);
    answer = { ...shown, result: 1 };
    await expect(client.recordAttestation(backupId, sent)).rejects.toThrow(CofferNetworkError);
    answer = shown;
    expect(await client.recordAttestation(backupId, sent)).toEqual(shown);
  });
});
