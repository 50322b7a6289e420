/**
 * Restore drills in the console (docs/console.md#restore-drills): each attestation the server shows is verified in
 * this page with the vault's keys once it is unlocked (key-use.tsx), and only a verified one counts as proof. Pure:
 * what a backup's drills say, and what each host's profile was last proven to be.
 */
import type { AttestationBody, AttestationPayloadBody } from '../../src/contract/attestation.js';

/** What checking one attestation found (src/client/attestation.ts verifyAttestation, plus the page's own check). */
export type DrillVerdict =
  | { status: 'verified'; attestation: AttestationBody; payload: AttestationPayloadBody }
  | { status: 'forged' | 'malformed'; attestation: AttestationBody; reason: string }
  | { status: 'mismatch'; attestation: AttestationBody; reason: string; payload: AttestationPayloadBody };

export type VerifiedDrill = Extract<DrillVerdict, { status: 'verified' }>;

/** What unlocking learnt about drills: every verdict by the backup the server shows it under, or why none were read. */
export interface DrillFindings {
  byBackup: Map<string, DrillVerdict[]>;
  /** Every attestation the server shows was checked (not only one backup's, as a restore on its page does). */
  complete: boolean;
  /** The server's list could not be read (the message), so nothing is known. */
  failure?: string;
}

export const isVerified = (verdict: DrillVerdict): verdict is VerifiedDrill => verdict.status === 'verified';

const checkedAtMs = (verdict: VerifiedDrill) => Date.parse(verdict.payload.checkedAt);

const newestFirst = (a: VerifiedDrill, b: VerifiedDrill) => checkedAtMs(b) - checkedAtMs(a);

/** Groups verdicts by the backup the server shows each under. */
export function byBackup(verdicts: readonly DrillVerdict[]): Map<string, DrillVerdict[]> {
  const grouped = new Map<string, DrillVerdict[]>();
  for (const verdict of verdicts) {
    const list = grouped.get(verdict.attestation.backupId) ?? [];
    list.push(verdict);
    grouped.set(verdict.attestation.backupId, list);
  }
  return grouped;
}

/**
 * The page's own check on a verified attestation: the account it was signed for must be the account the backup is
 * listed under (the owner's own or a host account's), else the server shows it under another host than was signed.
 */
export function checkListedAccount(verdict: DrillVerdict, listedAccountId: string | undefined): DrillVerdict {
  if (verdict.status !== 'verified' || listedAccountId === undefined) return verdict;
  if (verdict.payload.accountId.toLowerCase() === listedAccountId.toLowerCase()) return verdict;
  return {
    status: 'mismatch',
    attestation: verdict.attestation,
    payload: verdict.payload,
    reason: `it was signed for account ${verdict.payload.accountId}, the backup is listed under account ${listedAccountId}`,
  };
}

/** A backup's drills: its newest verified one (passed or failed), its newest verified pass, and what does not verify. */
export interface BackupDrills {
  newest: VerifiedDrill | null;
  lastPassed: VerifiedDrill | null;
  flagged: Exclude<DrillVerdict, VerifiedDrill>[];
}

export function summarise(verdicts: readonly DrillVerdict[]): BackupDrills {
  const verified = verdicts.filter(isVerified).sort(newestFirst);
  return {
    newest: verified[0] ?? null,
    lastPassed: verified.find((verdict) => verdict.payload.result === 'passed') ?? null,
    flagged: verdicts.filter((verdict): verdict is Exclude<DrillVerdict, VerifiedDrill> => !isVerified(verdict)),
  };
}

const DAY_MS = 86_400_000;
export const AGE_CHOICES = [7, 14, 30, 90] as const;
export type MaxAgeDays = (typeof AGE_CHOICES)[number];
export const DEFAULT_MAX_AGE_DAYS: MaxAgeDays = 14;

/** "just now", "5 minutes ago", "3 hours ago", "40 days ago" (a time ahead of this clock counts as now). */
export function ageText(at: string, now: number): string {
  const ms = Math.max(0, now - Date.parse(at));
  const count = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'} ago`;
  if (ms < 60_000) return 'just now';
  if (ms < 3_600_000) return count(Math.floor(ms / 60_000), 'minute');
  if (ms < DAY_MS) return count(Math.floor(ms / 3_600_000), 'hour');
  return count(Math.floor(ms / DAY_MS), 'day');
}

export const olderThan = (at: string, days: number, now: number) => now - Date.parse(at) > days * DAY_MS;

/** A backup as the drills view needs it: its id, status, the account it is listed under, and its host's label. */
export interface DrilledBackup {
  id: string;
  status: string;
  createdAt: string;
  host?: { accountId: string; label: string };
}

/** What the sealed metadata says a backup is, for grouping by profile (key-use.tsx reads it after unlock). */
export interface ProfileFacts {
  name: string;
  source: string;
  chainId?: string;
}

/** One host's one profile: its backups and what their verified drills prove. */
export interface ProfileRow {
  key: string;
  host: { accountId: string | null; label: string | null };
  /** The newest backup's name and source, or null when no backup of it could be opened with this vault. */
  profile: ProfileFacts | null;
  backupIds: string[];
  lastPassed: VerifiedDrill | null;
  /** The newest verified drill when it failed (a newer failure than the last pass). */
  failedSince: VerifiedDrill | null;
  flagged: number;
}

/**
 * A profile is the history chain a backup's sealed metadata names (docs/crypto.md §3a: one per `coffer run`
 * profile); a backup made without a profile is grouped by its sealed name and source. Two profiles may share a
 * name, so the name alone would let one's drill prove the other restorable.
 */
function profileKey(backup: DrilledBackup, facts: ProfileFacts | undefined): string {
  const host = backup.host?.accountId ?? 'own';
  if (!facts) return `${host}\0backup\0${backup.id}`;
  return facts.chainId ? `${host}\0chain\0${facts.chainId}` : `${host}\0name\0${facts.name}\0${facts.source}`;
}

/** Every host's profiles (the owner's own first, then hosts by label), each with its last proof. */
export function profileRows(
  backups: readonly DrilledBackup[],
  described: ReadonlyMap<string, ProfileFacts>,
  findings: DrillFindings,
): ProfileRow[] {
  const rows = new Map<string, ProfileRow & { verdicts: DrillVerdict[] }>();
  const newestFirstBackups = [...backups].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  for (const backup of newestFirstBackups) {
    if (backup.status !== 'READY') continue;
    const facts = described.get(backup.id);
    const key = profileKey(backup, facts);
    const row = rows.get(key) ?? {
      key,
      host: { accountId: backup.host?.accountId ?? null, label: backup.host?.label ?? null },
      profile: facts ?? null,
      backupIds: [],
      lastPassed: null,
      failedSince: null,
      flagged: 0,
      verdicts: [],
    };
    row.backupIds.push(backup.id);
    row.verdicts.push(...(findings.byBackup.get(backup.id) ?? []));
    rows.set(key, row);
  }
  return [...rows.values()]
    .map(({ verdicts, ...row }) => {
      const { newest, lastPassed, flagged } = summarise(verdicts);
      return { ...row, lastPassed, failedSince: newest?.payload.result === 'failed' ? newest : null, flagged: flagged.length };
    })
    .sort(
      (a, b) =>
        Number(a.host.label !== null) - Number(b.host.label !== null) ||
        (a.host.label ?? '').localeCompare(b.host.label ?? '') ||
        (a.profile?.name ?? '\uffff').localeCompare(b.profile?.name ?? '\uffff'),
    );
}

/** Where the chosen age is kept in this browser. */
export const MAX_AGE_STORAGE_KEY = 'coffer.console.drillMaxAgeDays';

export function storedMaxAge(storage: Pick<Storage, 'getItem'> | undefined): MaxAgeDays {
  const value = Number(storage?.getItem(MAX_AGE_STORAGE_KEY));
  return (AGE_CHOICES as readonly number[]).includes(value) ? (value as MaxAgeDays) : DEFAULT_MAX_AGE_DAYS;
}
