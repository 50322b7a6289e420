/**
 * Verifying the drill attestations the server shows, with the vault's keys while they are open in this page
 * (key-use.tsx identifyKeys) or in the restore worker. A list that could not be read leaves nothing proven and says why.
 */
import type { AttestationBody } from '../../src/contract/attestation.js';
import { byBackup, checkListedAccount, type DrillFindings, type DrillVerdict } from './drills.js';

type Crypto = typeof import('./crypto/envelope.js');

/** The server's attestations and the signed-in account (the owner of the backups not listed under a host). */
export type ShownAttestations = { attestations: AttestationBody[]; accountId: string } | { failure: string };

/** An entry the page can at least show under a backup; anything else in the server's list is left out. */
export const isRecord = (entry: unknown): entry is AttestationBody =>
  typeof entry === 'object' && entry !== null && typeof (entry as { backupId?: unknown }).backupId === 'string';

/** Verifies each attestation with every key of the ring (src/client/attestation.ts): never throws on what the server sent. */
export function verifyEach(crypto: Crypto, material: Uint8Array, attestations: readonly AttestationBody[]): DrillVerdict[] {
  const keys = crypto.masterKeys(material);
  return attestations.map((shown): DrillVerdict => {
    try {
      return { ...crypto.verifyAttestation(crypto.webPrimitives, keys, shown), attestation: shown };
    } catch (caught) {
      return { status: 'malformed', attestation: shown, reason: caught instanceof Error ? caught.message : String(caught) };
    }
  });
}

/**
 * Every attestation verified, and each verified one checked against the account its backup is listed under
 * (`hostAccountId` of the console's backup-keys list, else the signed-in account).
 */
export function verifyDrills(
  crypto: Crypto,
  material: Uint8Array,
  shown: ShownAttestations,
  backups: readonly { id: string; hostAccountId: string | null }[],
): DrillFindings {
  if ('failure' in shown) return { byBackup: new Map(), complete: true, failure: shown.failure };
  const listedAccount = new Map(backups.map((backup) => [backup.id, backup.hostAccountId ?? shown.accountId]));
  const verdicts = verifyEach(crypto, material, shown.attestations).map((verdict) =>
    checkListedAccount(verdict, listedAccount.get(verdict.attestation.backupId)),
  );
  return { byBackup: byBackup(verdicts), complete: true };
}
