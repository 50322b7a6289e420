/**
 * Restore drills (docs/client.md#restore-drills): a backup verified whole as `coffer verify` does (downloaded,
 * decrypted, decompressed, its archive read, sizes and SHA-256 checked, nothing written), and the result recorded at
 * the server as an attestation authenticated with the vault's key (docs/crypto.md#restore-attestations). Used by
 * `coffer verify --drill` and by the agent's scheduled drills. A backup that could not be checked (the network, a
 * backup gone) is no drill result: nothing is recorded for it.
 */
import os from 'node:os';
import {
  attestVerification,
  CLIENT_VERSION,
  CofferApiError,
  type BackupRecordBody,
  type CofferClient,
  verifyBackup,
  type VerifyResult,
} from '../../client/index.js';

/** A backup to drill and the account that holds it (named in the attestation). */
export interface DrillTarget {
  backupId: string;
  accountId: string;
}

/** One drill: its verification, and whether its attestation was recorded (and why not). */
export interface DrillReport {
  backupId: string;
  /** `not-run`: the backup could not be checked (verify's `unavailable`): no drill result, nothing recorded. */
  result: 'passed' | 'failed' | 'not-run';
  verify: VerifyResult;
  recorded: boolean;
  /** The attestation's id at the server, when recorded. */
  attestationId?: string;
  /** Why it was not recorded. */
  notRecorded?: string;
}

export interface DrillOptions {
  client: CofferClient;
  /** The vault's key material (the passphrase's key ring, or a kit's): opens the backups and signs the attestations. */
  material: Buffer;
  signal?: AbortSignal;
  /** The words for a failure that is not an integrity failure. */
  explain: (error: unknown) => string;
  /** Told each drill as it ends (the CLI prints it). */
  onReport?: (report: DrillReport) => void;
}

/** One drill in a line: its result, and whether it was recorded. */
export function drillLine(report: DrillReport): string {
  if (report.result === 'not-run') return `no drill result for ${report.backupId}: it could not be checked; nothing recorded`;
  const what = report.result === 'passed' ? 'drill passed' : 'drill FAILED';
  return report.recorded
    ? `${what} for ${report.backupId}, recorded`
    : `${what} for ${report.backupId}, NOT recorded: ${report.notRecorded}`;
}

/** Who drills: this machine's name and this client. */
export const drilledBy = () => ({ machine: os.hostname(), client: CLIENT_VERSION });

/** Why a drill was not recorded on a server older than the attestations. */
export const NO_DRILL_ROUTE = 'this server does not record restore drills';

/** A server without the attestation routes answers the unknown route's 404 (`not_found`, not `backup_not_found`). */
const isUnknownRoute = (error: unknown) => error instanceof CofferApiError && error.status === 404 && error.code === 'not_found';

/**
 * Drills each target in turn. Never throws for a backup's own failure (its report says it); throws only when
 * interrupted. `serverRecords` is false when the server turned out not to record drills (an older server).
 */
export async function drillBackups(
  targets: readonly DrillTarget[],
  options: DrillOptions,
): Promise<{ reports: DrillReport[]; serverRecords: boolean }> {
  const { client, material, signal } = options;
  const reports: DrillReport[] = [];
  let serverRecords = true;
  for (const target of targets) {
    const verify = await verifyBackup(target.backupId, { client, masterKey: material, signal, explain: options.explain });
    let report: DrillReport;
    if (verify.outcome === 'unavailable') {
      report = { backupId: target.backupId, result: 'not-run', verify, recorded: false, notRecorded: 'the backup could not be checked' };
    } else {
      const result = verify.outcome === 'verified' ? 'passed' : 'failed';
      report = { backupId: target.backupId, result, verify, recorded: false };
      if (!serverRecords) report.notRecorded = NO_DRILL_ROUTE;
      else {
        try {
          const body = attestVerification(verify, material, { accountId: target.accountId, checkedAt: new Date(), drilledBy: drilledBy() });
          const recorded = await client.recordAttestation(target.backupId, body, signal);
          report.recorded = true;
          report.attestationId = recorded.id;
        } catch (error) {
          if (signal?.aborted) throw error;
          if (isUnknownRoute(error)) serverRecords = false;
          report.notRecorded = isUnknownRoute(error) ? NO_DRILL_ROUTE : options.explain(error);
        }
      }
    }
    reports.push(report);
    options.onReport?.(report);
  }
  return { reports, serverRecords };
}

/** Which account holds each backup the key reads: its own (ownAccountId) and its host accounts' (listEveryBackup). */
export function accountsOf(
  ownAccountId: string,
  every: { backups: readonly BackupRecordBody[]; hosts: readonly { accountId: string; backups: readonly BackupRecordBody[] }[] },
): Map<string, string> {
  const holders = new Map<string, string>(every.backups.map((backup) => [backup.id, ownAccountId]));
  for (const host of every.hosts) for (const backup of host.backups) holders.set(backup.id, host.accountId);
  return holders;
}

/**
 * What the agent drills of a profile's backups: the newest READY one and one older READY one picked at random
 * (none when there is no READY backup; only the newest when it is the only one).
 */
export function drillChoice(backups: readonly BackupRecordBody[], pick: (n: number) => number): string[] {
  const ready = backups.filter((b) => b.status === 'READY').sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt));
  if (ready.length === 0) return [];
  const older = ready.slice(1);
  return older.length === 0 ? [ready[0]!.id] : [ready[0]!.id, older[pick(older.length)]!.id];
}
