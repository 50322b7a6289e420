/**
 * The console's drill rules (console/src/drills.ts), pure: only a verified attestation is proof, a verified one
 * signed for another account than the backup is listed under is a mismatch, profiles are told apart by their chain
 * (never by name alone), and the chosen age reads back only as one of its choices.
 */
import { describe, expect, it } from 'vitest';
import type { AttestationBody, AttestationPayloadBody } from '../../src/contract/attestation.js';
import {
  ageText,
  byBackup,
  checkListedAccount,
  profileRows,
  storedMaxAge,
  summarise,
  type DrillVerdict,
  type ProfileFacts,
} from '../../console/src/drills.js';

const OWNER = '11111111-1111-4111-8111-111111111111';
const HOST = '22222222-2222-4222-8222-222222222222';
const NOW = Date.parse('2026-11-28T12:00:00.000Z');
const daysAgo = (days: number) => new Date(NOW - days * 86_400_000).toISOString();

let serial = 0;
function verdict(
  backupId: string,
  status: DrillVerdict['status'],
  checkedAt: string,
  result: 'passed' | 'failed' = 'passed',
  accountId = OWNER,
): DrillVerdict {
  const attestation = { id: `a${++serial}`, backupId, accountId, checkedAt, result } as AttestationBody;
  const payload = { accountId, backupId, checkedAt, result } as AttestationPayloadBody;
  if (status === 'verified') return { status, attestation, payload };
  if (status === 'mismatch') return { status, attestation, payload, reason: 'relabelled' };
  return { status, attestation, reason: 'no key' };
}

describe('the console’s drill rules', () => {
  it('counts only verified attestations: a newer forged, altered or relabelled pass proves nothing', () => {
    const { newest, lastPassed, flagged } = summarise([
      verdict('b1', 'forged', daysAgo(0)),
      verdict('b1', 'mismatch', daysAgo(0.5)),
      verdict('b1', 'malformed', daysAgo(0.2)),
      verdict('b1', 'verified', daysAgo(2), 'failed'),
      verdict('b1', 'verified', daysAgo(5)),
      verdict('b1', 'verified', daysAgo(9)),
    ]);
    expect(newest?.payload.checkedAt).toBe(daysAgo(2));
    expect(newest?.payload.result).toBe('failed');
    expect(lastPassed?.payload.checkedAt).toBe(daysAgo(5));
    expect(flagged.map((v) => v.status)).toEqual(['forged', 'mismatch', 'malformed']);
    expect(summarise([verdict('b1', 'forged', daysAgo(0))])).toMatchObject({ newest: null, lastPassed: null });
  });

  it('flags a verified attestation signed for another account than the one its backup is listed under', () => {
    const signedForHost = verdict('b1', 'verified', daysAgo(1), 'passed', HOST);
    expect(checkListedAccount(signedForHost, HOST).status).toBe('verified');
    expect(checkListedAccount(signedForHost, HOST.toUpperCase()).status).toBe('verified');
    const moved = checkListedAccount(signedForHost, OWNER);
    expect(moved.status).toBe('mismatch');
    expect(moved).toMatchObject({ reason: expect.stringContaining(`signed for account ${HOST}`) });
    expect(checkListedAccount(verdict('b1', 'forged', daysAgo(1)), OWNER).status).toBe('forged');
  });

  it('groups by host and profile chain; backups without a chain by name and source; unopened ones alone', () => {
    const chain = '5b0d3c1e-8f4a-4c61-9a57-2f0e6d1c9b33';
    const other = '6c1e4d2f-9a5b-4d72-8b68-3a1f7e2dac44';
    const backups = [
      { id: 'b1', status: 'READY', createdAt: daysAgo(1) },
      { id: 'b2', status: 'READY', createdAt: daysAgo(2) },
      { id: 'b3', status: 'READY', createdAt: daysAgo(3) },
      { id: 'b4', status: 'READY', createdAt: daysAgo(1), host: { accountId: HOST, label: 'web' } },
      { id: 'b5', status: 'READY', createdAt: daysAgo(1) },
      { id: 'b6', status: 'PENDING_UPLOAD', createdAt: daysAgo(0) },
    ];
    const described = new Map<string, ProfileFacts>([
      ['b1', { name: 'data', source: '/home/a/data', chainId: chain }],
      ['b2', { name: 'data-renamed', source: '/home/a/data', chainId: chain }],
      ['b3', { name: 'data', source: '/srv/data', chainId: other }],
      ['b4', { name: 'data', source: '/home/a/data', chainId: chain }],
    ]);
    const findings = {
      byBackup: byBackup([
        verdict('b2', 'verified', daysAgo(2)),
        verdict('b3', 'forged', daysAgo(1)),
        verdict('b4', 'verified', daysAgo(20), 'failed'),
      ]),
      complete: true,
    };
    const rows = profileRows(backups, described, findings);
    expect(rows.map((row) => [row.host.label, row.profile?.name ?? null, row.backupIds])).toEqual([
      [null, 'data', ['b1', 'b2']],
      [null, 'data', ['b3']],
      [null, null, ['b5']],
      ['web', 'data', ['b4']],
    ]);
    expect(rows[0]!.lastPassed?.attestation.backupId).toBe('b2');
    expect(rows[1]).toMatchObject({ lastPassed: null, flagged: 1 });
    expect(rows[3]).toMatchObject({ lastPassed: null, flagged: 0 });
    expect(rows[3]!.failedSince?.payload.result).toBe('failed');
  });

  it('says ages in words and reads back only a chosen age', () => {
    expect(ageText(daysAgo(0), NOW)).toBe('just now');
    expect(ageText(new Date(NOW + 3_600_000).toISOString(), NOW)).toBe('just now');
    expect(ageText(new Date(NOW - 5 * 60_000).toISOString(), NOW)).toBe('5 minutes ago');
    expect(ageText(daysAgo(1), NOW)).toBe('1 day ago');
    expect(ageText(daysAgo(40), NOW)).toBe('40 days ago');
    const storage = (value: string | null) => ({ getItem: () => value });
    expect(storedMaxAge(storage('30'))).toBe(30);
    expect(storedMaxAge(storage('31'))).toBe(14);
    expect(storedMaxAge(storage(null))).toBe(14);
    expect(storedMaxAge(undefined)).toBe(14);
  });
});
