/**
 * Looking inside backups without restoring them: `coffer ls` (the entries of one backup) and `coffer verify`
 * (download, authenticate every chunk, check sizes and the SHA-256; nothing is written). Both read the whole
 * backup through readBackup (./restore.ts), the pipeline a restore uses, so what they report is what a
 * restore would find.
 */
import { randomInt } from 'node:crypto';
import type { Writable } from 'node:stream';
import { discard, listInto, readTar, type ListedEntry } from './extract.js';
import { IntegrityError, masterKeys, nodePrimitives, wipe, type BackupMetadata } from './envelope.js';
import { signAttestation, type AttestationRequestBody, type DrillCheck } from './attestation.js';
import { openBackup, readBackup, type RestoreEvent } from './restore.js';
import { DRILL_CHECKS } from './attestation.js';
import type { BackupRecordBody, CofferClient } from './sdk.js';

export interface ListOptions {
  client: CofferClient;
  masterKey: Buffer;
  backupId: string;
  /** Only this entry and what lies below it (archive-relative, e.g. `docs` or `docs/a.txt`). */
  path?: string;
  signal?: AbortSignal;
  onEvent?: (event: RestoreEvent) => void;
}

export interface ListResult {
  metadata: BackupMetadata;
  entries: ListedEntry[];
}

/** The entries of a backup, listed only once the whole backup has been authenticated and checked. */
export async function listBackup(options: ListOptions): Promise<ListResult> {
  const opened = await openBackup(options.client, options.masterKey, options.backupId, options.signal);
  try {
    const { metadata } = opened;
    let entries: ListedEntry[];
    if (metadata.archive === 'raw') {
      // No tar: one file whose bytes are the stream; it is still read whole, so `ls` also vouches for it.
      await readBackup(opened, { client: options.client, sink: discard(), signal: options.signal, onEvent: options.onEvent });
      entries = [{ path: metadata.name, type: 'file', size: metadata.plaintextSizeBytes, mode: 0o600, mtime: metadata.createdAt }];
    } else {
      const sink = listInto();
      await readBackup(opened, { client: options.client, sink, signal: options.signal, onEvent: options.onEvent });
      entries = sink.entries;
    }
    const prefix = options.path
      ?.split('/')
      .filter((part) => part !== '' && part !== '.')
      .join('/');
    if (prefix) entries = entries.filter((entry) => entry.path === prefix || entry.path.startsWith(`${prefix}/`));
    return { metadata, entries };
  } finally {
    wipe(opened.dek);
  }
}

/**
 * The outcome of verifying one backup, a plain value (so further checks, such as a backup history chain, can
 * be added beside the ones made here):
 *  - `verified`: every chunk authenticated, final tag present, sizes and SHA-256 as sealed;
 *  - `failed`: an integrity failure (tampering, truncation, wrong key) — `problem` says which;
 *  - `unavailable`: not READY, gone, or another error (network, permission) — not evidence of tampering.
 */
export interface VerifyResult {
  backupId: string;
  outcome: 'verified' | 'failed' | 'unavailable';
  problem?: string;
  /** The sealed metadata, when it opened. */
  metadata?: BackupMetadata;
  ciphertextBytes?: number;
  plaintextBytes?: number;
  plaintextSha256?: string;
  /** SHA-256 of the downloaded ciphertext: checked against the next link of its history chain. */
  ciphertextSha256?: string;
  /** The files (and hard links) the archive holds, counted as it was read (a raw archive holds one). */
  fileCount?: number;
  /**
   * The checks that ran and passed, in their order (what a restore drill attests): all of them when verified (but
   * `archive` for a raw backup, which has no tar to check); those before the failure when failed; none when unavailable.
   */
  checks: DrillCheck[];
}

/** The checks before `failed`, in order; those that do not apply to the archive left out. */
function checksBefore(failed: DrillCheck | 'none', archive: BackupMetadata['archive'] | undefined): DrillCheck[] {
  const ran = failed === 'none' ? [...DRILL_CHECKS] : DRILL_CHECKS.slice(0, DRILL_CHECKS.indexOf(failed));
  return archive === 'raw' ? ran.filter((check) => check !== 'archive') : ran;
}

/** A sink that checks the archive as it is read and counts its files: a tar parsed strictly, a raw stream taken whole. */
function checkedArchive(metadata: BackupMetadata): { sink: Writable; files: () => number } {
  if (metadata.archive === 'raw') return { sink: discard(), files: () => 1 };
  let files = 0;
  const sink = readTar((entry) => {
    if (entry.type === 'file' || entry.type === 'hardlink') files += 1;
  });
  return { sink, files: () => files };
}

export interface VerifyOptions {
  client: CofferClient;
  masterKey: Buffer;
  signal?: AbortSignal;
  onEvent?: (backupId: string, event: RestoreEvent) => void;
  /** The words for a failure that is not an integrity failure (default: its message). */
  explain?: (error: unknown) => string;
}

export async function verifyBackup(backupId: string, options: VerifyOptions): Promise<VerifyResult> {
  const { client, masterKey, signal } = options;
  let metadata: BackupMetadata | undefined;
  /** Which check an integrity failure of the read came from (readBackup says). */
  let failedCheck: DrillCheck = 'decrypt';
  try {
    const opened = await openBackup(client, masterKey, backupId, signal);
    try {
      metadata = opened.metadata;
      const archive = checkedArchive(metadata);
      const read = await readBackup(opened, {
        client,
        sink: archive.sink,
        signal,
        hashCiphertext: true,
        onEvent: (event) => options.onEvent?.(backupId, event),
        onFailedCheck: (check) => (failedCheck = check),
      });
      return {
        backupId,
        outcome: 'verified',
        metadata,
        ...read,
        fileCount: archive.files(),
        checks: checksBefore('none', metadata.archive),
      };
    } finally {
      wipe(opened.dek);
    }
  } catch (error) {
    if (signal?.aborted) throw error;
    const opened = metadata ? { metadata } : {};
    if (error instanceof IntegrityError) {
      // The keys or the metadata did not open: nothing was downloaded or checked.
      const checks = metadata ? checksBefore(failedCheck, metadata.archive) : [];
      return { backupId, outcome: 'failed', problem: error.message, checks, ...opened };
    }
    const problem = options.explain ? options.explain(error) : error instanceof Error ? error.message : String(error);
    return { backupId, outcome: 'unavailable', problem, checks: [], ...opened };
  }
}

/** The ids `coffer verify` checks: the ones given, every READY backup (`all`), or `sample` READY ones at random. */
export function chooseBackups(backups: readonly BackupRecordBody[], choice: { all?: boolean; sample?: number }): string[] {
  const ready = backups.filter((b) => b.status === 'READY').map((b) => b.id);
  if (choice.all) return ready;
  const pool = [...ready];
  const picked: string[] = [];
  while (picked.length < (choice.sample ?? 0) && pool.length > 0) picked.push(pool.splice(randomInt(pool.length), 1)[0]!);
  return picked;
}

/** Who ran a drill and where its backup is held: what an attestation names beside the verification's facts. */
export interface DrillFacts {
  /** The account that holds the backup (the caller's own, or the host account's). */
  accountId: string;
  /** When the drill ended, by this machine's clock. */
  checkedAt: Date;
  /** The machine's name and the client (`coffer-cli/1.4.0`), as the drilling machine says. */
  drilledBy: { machine: string; client: string };
}

const MAX_FAILURE_CHARS = 500;

/**
 * A verification (verified or failed) as a restore drill's attestation (docs/crypto.md#restore-attestations),
 * authenticated with the current key of `material` (a master key or a key ring; a kit's material too). An
 * unavailable backup was not checked: it has no attestation (RangeError).
 */
export function attestVerification(result: VerifyResult, material: Uint8Array, facts: DrillFacts): AttestationRequestBody {
  if (result.outcome === 'unavailable') throw new RangeError(`backup ${result.backupId} was not checked: nothing to attest`);
  const passed = result.outcome === 'verified';
  const problem = result.problem ?? 'integrity check failed';
  return signAttestation(nodePrimitives, masterKeys(material)[0]!, {
    ...facts,
    backupId: result.backupId,
    result: passed ? 'passed' : 'failed',
    failure: passed ? null : problem.length > MAX_FAILURE_CHARS ? `${problem.slice(0, MAX_FAILURE_CHARS - 1)}…` : problem,
    checks: result.checks,
    ciphertextSizeBytes: result.ciphertextBytes ?? null,
    ciphertextSha256: result.ciphertextSha256 ?? null,
    plaintextSizeBytes: result.plaintextBytes ?? null,
    fileCount: result.fileCount ?? null,
    drilledBy: { machine: facts.drilledBy.machine.slice(0, 255), client: facts.drilledBy.client.slice(0, 64) },
  });
}
