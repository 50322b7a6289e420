/**
 * Restore attestations (docs/api-rules.md#attestations): what a drill reported, as its client authenticated it. The
 * server cannot check the mac (the key is derived from the vault's master key); it only refuses what is malformed and
 * what names another backup or account, and reads the few fields it shows. Pure: the wire schema's check of the payload
 * is handed in by the caller (the domain does not know the wire).
 */
import { AppError, type ValidationIssue } from './errors.js';

/** What a drill reports: the server reads it from the payload and cannot check it. */
export const ATTESTATION_RESULTS = ['passed', 'failed'] as const;
export type AttestationResult = (typeof ATTESTATION_RESULTS)[number];

/** The longest payload accepted, in bytes (decoded). */
export const MAX_PAYLOAD_BYTES = 4096;
/** An HMAC-SHA-256. */
export const MAC_BYTES = 32;
/** The newest attestations kept per backup: recording one more drops the oldest of that backup. */
export const ATTESTATIONS_KEPT_PER_BACKUP = 20;
/** GET /api/attestations: how many by default, and at most. */
export const ATTESTATION_LIST_DEFAULT = 200;
export const ATTESTATION_LIST_MAX = 1000;

/** One stored attestation. */
export interface RestoreAttestation {
  id: string;
  /** The account that holds the backup (a host account's backup: the host account). */
  accountId: string;
  backupId: string;
  /** The server's clock when it was recorded. */
  recordedAt: number;
  /** The credential that recorded it: an API key id, or `session:<id>` for a console session opened by a link. */
  recordedBy: string;
  /** Read from the payload (the drilling machine's clock). */
  checkedAt: number;
  result: AttestationResult;
  /** Standard base64 of the payload bytes and of the mac, as sent (canonical: checked on the way in). */
  payload: string;
  mac: string;
}

/** An attestation request that passed every check the server can make; what it stores of it. */
export type CheckedAttestation = Pick<RestoreAttestation, 'accountId' | 'backupId' | 'checkedAt' | 'result' | 'payload' | 'mac'>;

/** The wire schema's check of the decoded payload: the first issue (path relative to the payload), or undefined. */
export type PayloadShapeCheck = (payload: unknown) => ValidationIssue | undefined;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-](\d{2}):(\d{2}))$/;

class Refusal extends Error {
  constructor(readonly issue: ValidationIssue) {
    super(issue.message);
  }
}

const refuse = (path: string, message: string): never => {
  throw new Refusal({ path, message });
};

/** Strict standard base64 (padded, no whitespace, zero trailing bits): the bytes, or a refusal at `path`. */
export function decodeBase64Strict(text: string, path: string): Uint8Array {
  if (!BASE64.test(text)) refuse(path, 'must be standard base64 (A-Z, a-z, 0-9, +, /, padded with =)');
  const binary = atob(text);
  if (btoa(binary) !== text) refuse(path, 'must be canonical base64 (the unused bits of its last character are zero)');
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

const isLeapYear = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
const daysInMonth = (year: number, month: number) => (month === 2 ? (isLeapYear(year) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31);

/**
 * RFC 3339 with a time zone (what AttestationPayload.checkedAt holds): epoch ms, or undefined when it is not one or
 * names a day or time that does not exist.
 */
export function parseInstant(text: string): number | undefined {
  const match = RFC3339.exec(text);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fraction = Number(`0.${match[7] ?? '0'}`);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  if (day > daysInMonth(year, month)) return undefined;
  const offsetHours = match[9] === undefined ? 0 : Number(match[9]);
  const offsetMinutes = match[10] === undefined ? 0 : Number(match[10]);
  if (offsetHours > 23 || offsetMinutes > 59) return undefined;
  const offset = (offsetHours * 60 + offsetMinutes) * 60_000 * (match[8]!.startsWith('-') ? -1 : 1);
  const utc = new Date(0);
  utc.setUTCFullYear(year, month - 1, day);
  utc.setUTCHours(hour, minute, second, 0);
  return utc.getTime() - offset + Math.floor(fraction * 1000);
}

function utf8Json(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return refuse('payload', 'must decode to UTF-8 text');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return refuse('payload', 'must decode to JSON');
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

function stringField(body: Record<string, unknown>, name: string): string {
  const value = Object.hasOwn(body, name) ? body[name] : undefined;
  if (typeof value !== 'string') refuse(name, 'is required and must be a string');
  return value as string;
}

/** The payload's own fields the server reads, against the backup the request is for. */
function readPayload(
  payload: unknown,
  backup: { id: string; accountId: string },
  shapeIssue: PayloadShapeCheck,
): Pick<CheckedAttestation, 'checkedAt' | 'result'> {
  if (!isRecord(payload)) refuse('payload', 'must decode to a JSON object');
  const fields = payload as Record<string, unknown>;
  const issue = shapeIssue(fields);
  if (issue) refuse(issue.path === '' ? 'payload' : `payload.${issue.path}`, issue.message);
  const own = (name: string) => (Object.hasOwn(fields, name) ? fields[name] : undefined);
  if (own('backupId') !== backup.id) refuse('payload.backupId', 'must be the id of the backup in the path');
  if (own('accountId') !== backup.accountId) refuse('payload.accountId', "must be the id of the backup's account");
  const text = own('checkedAt');
  const checkedAt = typeof text === 'string' && /[Zz]$/.test(text) ? parseInstant(text) : undefined;
  if (checkedAt === undefined) refuse('payload.checkedAt', 'must be an RFC 3339 date-time in UTC (ending in Z)');
  const result = own('result');
  if (!ATTESTATION_RESULTS.includes(result as AttestationResult)) refuse('payload.result', 'must be "passed" or "failed"');
  if ((result === 'passed') !== (own('failure') === null)) {
    refuse('payload.failure', 'must be null for a passed drill and the reason for a failed one');
  }
  return { checkedAt: checkedAt!, result: result as AttestationResult };
}

/**
 * The body of `POST /api/backups/{id}/attestations` for `backup`, checked: strict base64, a payload of at most
 * MAX_PAYLOAD_BYTES of UTF-8 JSON that passes `shapeIssue` and names this backup and its account with a parseable
 * checkedAt, and a mac of MAC_BYTES. Anything else: AppError validation_failed naming the first problem's path.
 */
export function checkAttestationRequest(
  body: unknown,
  backup: { id: string; accountId: string },
  shapeIssue: PayloadShapeCheck,
): CheckedAttestation {
  try {
    if (!isRecord(body)) refuse('(body)', 'must be a JSON object');
    const fields = body as Record<string, unknown>;
    const payload = stringField(fields, 'payload');
    const mac = stringField(fields, 'mac');
    const extra = Object.keys(fields).find((name) => name !== 'payload' && name !== 'mac');
    if (extra !== undefined) refuse(extra.slice(0, 100), 'is not a member of an attestation request');
    if (decodeBase64Strict(mac, 'mac').length !== MAC_BYTES) refuse('mac', `must decode to exactly ${MAC_BYTES} bytes`);
    // Checked before decoding: base64 of MAX_PAYLOAD_BYTES is at most this long.
    if (payload.length > 4 * Math.ceil(MAX_PAYLOAD_BYTES / 3)) refuse('payload', `must decode to at most ${MAX_PAYLOAD_BYTES} bytes`);
    const bytes = decodeBase64Strict(payload, 'payload');
    if (bytes.length === 0 || bytes.length > MAX_PAYLOAD_BYTES) refuse('payload', `must decode to 1 to ${MAX_PAYLOAD_BYTES} bytes`);
    const read = readPayload(utf8Json(bytes), backup, shapeIssue);
    return { accountId: backup.accountId, backupId: backup.id, ...read, payload, mac };
  } catch (error) {
    if (error instanceof Refusal) throw AppError.validation([error.issue], 'The attestation is not valid.');
    throw error;
  }
}

/** The `limit` of GET /api/attestations: ATTESTATION_LIST_DEFAULT when absent, else 1 to ATTESTATION_LIST_MAX. */
export function attestationListLimit(text: string | undefined): number {
  if (text === undefined) return ATTESTATION_LIST_DEFAULT;
  const limit = /^[0-9]{1,7}$/.test(text) ? Number(text) : NaN;
  if (!(limit >= 1 && limit <= ATTESTATION_LIST_MAX)) {
    throw AppError.validation([{ path: 'limit', message: `must be a whole number from 1 to ${ATTESTATION_LIST_MAX}` }]);
  }
  return limit;
}
