/**
 * Restore attestations (docs/crypto.md#restore-attestations): a drill's result, authenticated with HMAC-SHA-256 under
 * a key derived from the vault's master key, so that the server stores and shows it but can neither forge nor alter
 * one. Environment-neutral (no Node built-in): the CLI's drill, the SDK and the console's page all use it, each on its
 * own libsodium provider (Primitives) for the key derivation; HMAC is @noble/hashes' on both.
 *
 * The wire shapes are the contract's (src/contract/attestation.ts), imported as types only: the client bundle pulls in
 * no schema library. test/client/attestation.test.ts checks that the constants below are the contract's.
 */
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import type {
  AttestationBody,
  AttestationListBody,
  AttestationPayloadBody,
  AttestationRequestBody,
  DRILL_CHECKS as ContractDrillChecks,
} from '../contract/attestation.js';
import { KEY_BYTES, utf8, type Primitives } from './envelope-primitives.js';
import { IntegrityError } from './envelope-format.js';
import { CofferNetworkError } from './errors.js';

export type { AttestationBody, AttestationListBody, AttestationPayloadBody, AttestationRequestBody };

/** The payload's `format`. */
export const ATTESTATION_FORMAT = 'coffer-attestation/v1';
/** crypto_kdf_derive_from_key's context and subkey id for the attestation key. */
export const ATTESTATION_KDF_CONTEXT = 'cofferat';
export const ATTESTATION_KDF_SUBKEY_ID = 1;
export const MAX_ATTESTATION_PAYLOAD_BYTES = 4096;
export const ATTESTATION_MAC_BYTES = 32;
/** What a drill checks, in the order it checks them. */
export const DRILL_CHECKS = [
  'download',
  'decrypt',
  'decompress',
  'archive',
  'sizes',
  'sha256',
] as const satisfies typeof ContractDrillChecks;
/** One of DRILL_CHECKS. */
export type DrillCheck = (typeof DRILL_CHECKS)[number];

/** What a drill found, as the drilling client knows it: signAttestation turns it into a payload. */
export interface DrillOutcome {
  /** The account that holds the backup (lower-case UUID). */
  accountId: string;
  /** The backup drilled. */
  backupId: string;
  /** When the drill ended, by this machine's clock. */
  checkedAt: Date;
  result: 'passed' | 'failed';
  /** Null when passed; a short reason when failed. */
  failure: string | null;
  /** The checks that ran and passed, in DRILL_CHECKS order. */
  checks: DrillCheck[];
  /** The ciphertext as downloaded: its length and lower-case hex SHA-256 (null when the download did not complete). */
  ciphertextSizeBytes: number | null;
  ciphertextSha256: string | null;
  /** The plaintext's length and the archive's file count (null when the drill did not get that far). */
  plaintextSizeBytes: number | null;
  fileCount: number | null;
  /** This machine's name (at most 255 characters) and client ("coffer-cli/1.4.0", at most 64). */
  drilledBy: { machine: string; client: string };
}

/**
 * What verifyAttestation found: `verified` (a key of the ring made it and the server shows it as it is: the facts are
 * the payload's); `forged` (the mac verifies under no key of the ring: forged, altered, or made by another vault);
 * `mismatch` (authentic, but the server shows other facts than the payload's: a re-labelled attestation); `malformed`
 * (the mac verifies but the payload breaks the format: a faulty writer, or a newer format).
 */
export type AttestationVerdict =
  | { status: 'verified'; payload: AttestationPayloadBody }
  | { status: 'forged'; reason: string }
  | { status: 'mismatch'; reason: string; payload: AttestationPayloadBody }
  | { status: 'malformed'; reason: string };

/** Lower case only: the server shows ids in lower case, and the labels are compared exactly. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** RFC 3339 in UTC ("Z"), with optional fractional seconds: what Date.prototype.toISOString writes. */
const UTC_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const VAULT_KEY = /^[0-9a-f]{16}$/;
const CHECK_NAME = /^[a-z0-9-]{1,32}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const MAX_CHECKS = 16;
const MAX_FAILURE_CHARS = 500;
const MAX_MACHINE_CHARS = 255;
const MAX_CLIENT_CHARS = 64;
/** Base64 text longer than this is not decoded (a payload of MAX_ATTESTATION_PAYLOAD_BYTES is 5,464 characters). */
const MAX_BASE64_CHARS = 64 * 1024;

/** The attestation key of one master key: crypto_kdf_derive_from_key(32, 1, "cofferat", masterKey), in secure memory. */
export function deriveAttestationKey<B extends Uint8Array>(p: Primitives<B>, masterKey: Uint8Array): B {
  if (masterKey.length !== KEY_BYTES) throw new RangeError(`a master key is ${KEY_BYTES} bytes, not ${masterKey.length}`);
  const key = p.secureAlloc(KEY_BYTES);
  p.kdfDerive(key, ATTESTATION_KDF_SUBKEY_ID, ATTESTATION_KDF_CONTEXT, masterKey);
  return key;
}

/** Names the key that made an attestation: lower-case hex of SHA-256(attestation key)[0:8]. */
export function vaultKeyOf<B extends Uint8Array>(p: Primitives<B>, attestationKey: Uint8Array): string {
  const digest = p.alloc(32);
  p.sha256(digest, attestationKey);
  return hexOf(digest.subarray(0, 8));
}

/** HMAC-SHA-256(key = attestation key, message = payload bytes). */
export function attestationMac(attestationKey: Uint8Array, payload: Uint8Array): Uint8Array {
  return hmac(sha256, attestationKey, payload);
}

/**
 * The attestation of a drill, made with the vault's current master key (key_0 of the ring): the payload's UTF-8 JSON
 * bytes and their mac, as `POST /api/backups/{id}/attestations` takes them. Throws (RangeError) on an outcome the
 * format cannot carry: the caller's mistake, never sent.
 */
export function signAttestation(p: Primitives, masterKey: Uint8Array, outcome: DrillOutcome): AttestationRequestBody {
  const key = deriveAttestationKey(p, masterKey);
  try {
    const payload = payloadOf(outcome, vaultKeyOf(p, key));
    const problem = payloadProblem(payload);
    if (problem) throw new RangeError(`cannot attest this drill: ${problem}`);
    const bytes = utf8.encode(JSON.stringify(payload));
    if (bytes.length > MAX_ATTESTATION_PAYLOAD_BYTES) {
      throw new RangeError(`cannot attest this drill: its payload is ${bytes.length} bytes, over ${MAX_ATTESTATION_PAYLOAD_BYTES}`);
    }
    return { payload: p.toBase64(bytes), mac: p.toBase64(attestationMac(key, bytes)) };
  } finally {
    p.wipe(key);
  }
}

function payloadOf(outcome: DrillOutcome, vaultKey: string): AttestationPayloadBody {
  return {
    format: ATTESTATION_FORMAT,
    accountId: outcome.accountId.toLowerCase(),
    backupId: outcome.backupId.toLowerCase(),
    checkedAt: outcome.checkedAt.toISOString(),
    result: outcome.result,
    failure: outcome.failure,
    checks: [...outcome.checks],
    ciphertextSizeBytes: outcome.ciphertextSizeBytes,
    ciphertextSha256: outcome.ciphertextSha256,
    plaintextSizeBytes: outcome.plaintextSizeBytes,
    fileCount: outcome.fileCount,
    vaultKey,
    drilledBy: { machine: outcome.drilledBy.machine, client: outcome.drilledBy.client },
  };
}

/**
 * Verifies an attestation as the server shows it, against every master key of the vault's ring (newest first). Any
 * input, however hostile, gives a verdict: it never throws.
 */
export function verifyAttestation(p: Primitives, masterKeys: readonly Uint8Array[], shown: AttestationBody): AttestationVerdict {
  const record: Record<string, unknown> = typeof shown === 'object' && shown !== null ? (shown as unknown as Record<string, unknown>) : {};
  const payloadBytes = decodeBase64(p, record.payload);
  const mac = decodeBase64(p, record.mac);
  if (!payloadBytes) return { status: 'forged', reason: 'the payload is missing or not canonical base64' };
  if (!mac || mac.length !== ATTESTATION_MAC_BYTES)
    return { status: 'forged', reason: 'the mac is missing or not 32 bytes of canonical base64' };
  const vaultKey = keyThatMade(p, masterKeys, payloadBytes, mac);
  if (vaultKey === undefined) {
    return { status: 'forged', reason: "the mac verifies under no key of this vault: forged, altered, or another vault's" };
  }
  const read = readPayload(payloadBytes);
  if (typeof read === 'string') return { status: 'malformed', reason: read };
  if (read.vaultKey !== vaultKey) {
    return { status: 'malformed', reason: `the payload names key ${read.vaultKey}, but key ${vaultKey} made its mac` };
  }
  const relabelled = relabelling(record, read);
  if (relabelled) return { status: 'mismatch', reason: relabelled, payload: read };
  return { status: 'verified', payload: read };
}

/** The vaultKey of the ring key whose attestation key gives `mac` over `payload`, or undefined. */
function keyThatMade(p: Primitives, masterKeys: readonly Uint8Array[], payload: Uint8Array, mac: Uint8Array): string | undefined {
  for (const masterKey of masterKeys) {
    if (!(masterKey instanceof Uint8Array) || masterKey.length !== KEY_BYTES) continue;
    const key = deriveAttestationKey(p, masterKey);
    try {
      if (equalInConstantTime(attestationMac(key, payload), mac)) return vaultKeyOf(p, key);
    } finally {
      p.wipe(key);
    }
  }
  return undefined;
}

/** Compares two byte strings in time that depends only on their lengths (the mac is 32 bytes, always). */
export function equalInConstantTime(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

/** The server's labels that differ from the authenticated payload's, as a sentence; '' when they all agree. */
function relabelling(shown: Record<string, unknown>, payload: AttestationPayloadBody): string {
  const differing: string[] = [];
  if (shown.accountId !== payload.accountId) differing.push('accountId');
  if (shown.backupId !== payload.backupId) differing.push('backupId');
  if (!sameInstant(shown.checkedAt, payload.checkedAt)) differing.push('checkedAt');
  if (shown.result !== payload.result) differing.push('result');
  if (differing.length === 0) return '';
  return `the server shows another ${differing.join(', ')} than the authenticated payload says`;
}

/** The server keeps milliseconds and shows its own RFC 3339 form: the same instant, in the same strict form. */
const sameInstant = (shown: unknown, authentic: string) => isUtcTime(shown) && Date.parse(shown as string) === Date.parse(authentic);

/** Canonical padded base64 only (its unused bits zero): one text per byte string, so no changed character verifies. */
function decodeBase64(p: Primitives, value: unknown): Uint8Array | undefined {
  if (typeof value !== 'string' || value === '' || value.length > MAX_BASE64_CHARS || !BASE64.test(value)) return undefined;
  let bytes: Uint8Array;
  try {
    bytes = p.fromBase64(value);
  } catch {
    return undefined; // libsodium.js refuses non-zero unused bits itself
  }
  return p.toBase64(bytes) === value ? bytes : undefined;
}

/** The payload, or why it breaks the format. */
function readPayload(bytes: Uint8Array): AttestationPayloadBody | string {
  if (bytes.length > MAX_ATTESTATION_PAYLOAD_BYTES) return `the payload is ${bytes.length} bytes, over ${MAX_ATTESTATION_PAYLOAD_BYTES}`;
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes));
  } catch {
    return 'the payload is not UTF-8 JSON';
  }
  const problem = payloadProblem(value);
  return problem || (value as AttestationPayloadBody);
}

/** What makes `value` no payload of this format (the first fault found), or ''. Unknown members are ignored. */
export function payloadProblem(value: unknown): string {
  if (!isRecord(value)) return 'the payload is not a JSON object';
  if (value.format !== ATTESTATION_FORMAT) {
    return typeof value.format === 'string' && /^coffer-attestation\//.test(value.format)
      ? `the payload is in format ${JSON.stringify(value.format.slice(0, 40))}, which this coffer does not read: made by a newer coffer`
      : `the payload's format is not "${ATTESTATION_FORMAT}"`;
  }
  const memberProblem = memberProblems(value).find((problem) => problem !== '');
  if (memberProblem) return memberProblem;
  if ((value.result === 'passed') !== (value.failure === null)) return 'a passed drill has no failure, and a failed one names it';
  return '';
}

function memberProblems(value: Record<string, unknown>): string[] {
  const drilledBy = value.drilledBy;
  return [
    check(typeof value.accountId === 'string' && UUID.test(value.accountId), 'accountId is not a lower-case UUID'),
    check(typeof value.backupId === 'string' && UUID.test(value.backupId), 'backupId is not a lower-case UUID'),
    check(isUtcTime(value.checkedAt), 'checkedAt is not an RFC 3339 UTC time'),
    check(value.result === 'passed' || value.result === 'failed', 'result is neither "passed" nor "failed"'),
    check(
      value.failure === null || isText(value.failure, 1, MAX_FAILURE_CHARS),
      `failure is neither null nor 1 to ${MAX_FAILURE_CHARS} characters`,
    ),
    check(
      Array.isArray(value.checks) &&
        value.checks.length <= MAX_CHECKS &&
        value.checks.every((name) => typeof name === 'string' && CHECK_NAME.test(name)),
      `checks is not a list of at most ${MAX_CHECKS} check names`,
    ),
    check(isCountOrNull(value.ciphertextSizeBytes), 'ciphertextSizeBytes is neither null nor a count'),
    check(
      value.ciphertextSha256 === null || (typeof value.ciphertextSha256 === 'string' && SHA256_HEX.test(value.ciphertextSha256)),
      'ciphertextSha256 is neither null nor 64 lower-case hex digits',
    ),
    check(isCountOrNull(value.plaintextSizeBytes), 'plaintextSizeBytes is neither null nor a count'),
    check(isCountOrNull(value.fileCount), 'fileCount is neither null nor a count'),
    check(typeof value.vaultKey === 'string' && VAULT_KEY.test(value.vaultKey), 'vaultKey is not 16 lower-case hex digits'),
    check(
      isRecord(drilledBy) && isText(drilledBy.machine, 0, MAX_MACHINE_CHARS) && isText(drilledBy.client, 0, MAX_CLIENT_CHARS),
      `drilledBy is not {machine (at most ${MAX_MACHINE_CHARS} characters), client (at most ${MAX_CLIENT_CHARS})}`,
    ),
  ];
}

const check = (ok: boolean, problem: string) => (ok ? '' : problem);
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isText = (value: unknown, min: number, max: number) => typeof value === 'string' && value.length >= min && value.length <= max;
const isCountOrNull = (value: unknown) => value === null || (Number.isSafeInteger(value) && (value as number) >= 0);

/** An RFC 3339 UTC time of a day that exists (Date.parse alone takes 2026-02-30 for March 2). */
function isUtcTime(value: unknown): boolean {
  if (typeof value !== 'string' || !UTC_TIME.test(value)) return false;
  const instant = Date.parse(value);
  return Number.isFinite(instant) && new Date(instant).toISOString().slice(0, 19) === value.slice(0, 19);
}

function hexOf(bytes: Uint8Array): string {
  let hex = '';
  for (const byte of bytes) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

// ---- the server's answers (CofferClient.recordAttestation, listAttestations), read as the hostile input they may be ----

const SHOWN_TEXT_MEMBERS = ['id', 'accountId', 'backupId', 'recordedAt', 'recordedByKeyId', 'checkedAt', 'payload', 'mac'] as const;

const unusable = (what: string, why: string) =>
  new CofferNetworkError(`the server's ${what} answer is unusable (${why}): a Coffer server does not answer so`);

/**
 * One attestation as the server shows it: exactly the contract's members (others dropped), each a string, `result`
 * passed or failed; else CofferNetworkError. Nothing in it is trusted: verifyAttestation says what it is worth.
 */
export function parseShownAttestation(value: unknown, what: string): AttestationBody {
  if (!isRecord(value)) throw unusable(what, 'an attestation is not an object');
  for (const member of SHOWN_TEXT_MEMBERS) {
    if (typeof value[member] !== 'string') throw unusable(what, `an attestation has no ${member}`);
  }
  if (value.result !== 'passed' && value.result !== 'failed') throw unusable(what, 'an attestation has no result');
  const shown = Object.fromEntries(SHOWN_TEXT_MEMBERS.map((member) => [member, value[member]]));
  return { ...shown, result: value.result } as AttestationBody;
}

/**
 * `{attestations: [...]}` as the server shows it (parseShownAttestation for each). For one backup's list, an
 * attestation shown under another backup is an IntegrityError, as any answer about another backup is.
 */
export function parseAttestationList(value: unknown, requestedBackupId?: string): AttestationListBody {
  const what = requestedBackupId === undefined ? 'attestation list' : "backup's attestation list";
  if (!isRecord(value) || !Array.isArray(value.attestations)) throw unusable(what, 'no attestations list');
  const attestations = value.attestations.map((entry) => parseShownAttestation(entry, what));
  if (requestedBackupId !== undefined) {
    for (const shown of attestations) requireAttestationOf(requestedBackupId, shown);
  }
  return { attestations };
}

/** The server's record of an attestation it was sent must be of that backup. */
export function requireAttestationOf(requestedBackupId: string, shown: AttestationBody): AttestationBody {
  if (shown.backupId !== requestedBackupId) {
    throw new IntegrityError(
      `the server answered with an attestation of backup ${JSON.stringify(shown.backupId)} when asked for ${JSON.stringify(requestedBackupId)}`,
    );
  }
  return shown;
}
