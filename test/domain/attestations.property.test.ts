/**
 * The server's check of an attestation request (src/domain/attestations.ts, with the wire schema's check of
 * src/api/attestations.ts), without a server: a valid request comes back as sent with checkedAt and result read from
 * it; any hostile body (anything at all, broken base64, bytes that are not UTF-8 JSON, a valid payload with one member
 * changed or removed, a mac of the wrong size) either passes every rule the server states or is refused with
 * validation_failed naming a member: never another error, never a value outside those rules.
 */
import { randomBytes } from 'node:crypto';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { attestationPayloadIssue } from '../../src/api/attestations.js';
import {
  ATTESTATION_MAC_BYTES,
  AttestationPayload,
  DRILL_CHECKS,
  DRILL_RESULTS,
  MAX_ATTESTATION_PAYLOAD_BYTES,
} from '../../src/contract/attestation.js';
import {
  ATTESTATION_RESULTS,
  type CheckedAttestation,
  MAC_BYTES,
  MAX_PAYLOAD_BYTES,
  attestationListLimit,
  checkAttestationRequest,
  decodeBase64Strict,
  parseInstant,
} from '../../src/domain/attestations.js';
import { AppError } from '../../src/domain/errors.js';

const BACKUP = { id: '0190a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d', accountId: '0190a3c4-0000-7000-8000-00000000abcd' };
const RUNS = 400;

// The oracle: the contract's schema with its formats, checked by TypeBox itself (this process only; the server
// leaves formats to the domain's own rules).
if (!FormatRegistry.Has('uuid'))
  FormatRegistry.Set('uuid', (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v));
if (!FormatRegistry.Has('date-time'))
  FormatRegistry.Set('date-time', (v) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(v));

const check = (body: unknown) => checkAttestationRequest(body, BACKUP, attestationPayloadIssue);

/** What the check returned, or undefined when it refused: only ever with validation_failed naming a member. */
function outcome(body: unknown): CheckedAttestation | undefined {
  try {
    return check(body);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    const refusal = error as AppError;
    expect(refusal.code).toBe('validation_failed');
    const issues = refusal.details!.issues as { path: string; message: string }[];
    expect(issues).toHaveLength(1);
    expect(typeof issues[0]!.path).toBe('string');
    expect(issues[0]!.message.length).toBeGreaterThan(0);
    expect(issues[0]!.path.length).toBeLessThanOrEqual(200);
    return undefined;
  }
}

/** Every rule a stored attestation satisfies, whatever body it came from. */
function expectStorable(checked: CheckedAttestation, body: { payload: string; mac: string }) {
  expect(checked.payload).toBe(body.payload);
  expect(checked.mac).toBe(body.mac);
  expect(Buffer.from(checked.mac, 'base64').toString('base64')).toBe(checked.mac);
  expect(Buffer.from(checked.mac, 'base64')).toHaveLength(MAC_BYTES);
  const bytes = Buffer.from(checked.payload, 'base64');
  expect(bytes.toString('base64')).toBe(checked.payload);
  expect(bytes.length).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
  const payload = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes));
  expect(Value.Check(AttestationPayload, payload)).toBe(true);
  expect(payload.backupId).toBe(BACKUP.id);
  expect(payload.accountId).toBe(BACKUP.accountId);
  expect(checked).toMatchObject({ backupId: BACKUP.id, accountId: BACKUP.accountId, result: payload.result });
  expect(ATTESTATION_RESULTS).toContain(checked.result);
  expect(checked.checkedAt).toBe(Date.parse(payload.checkedAt));
}

const instant = fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true });
const hex = (length: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${length}}$`));
const count = fc.oneof(fc.constant(null), fc.nat());

/** Payloads a drill could write, with members a later version might add. */
const validPayload = fc
  .record({
    format: fc.constant('coffer-attestation/v1'),
    accountId: fc.constant(BACKUP.accountId),
    backupId: fc.constant(BACKUP.id),
    checkedAt: instant.map((d) => d.toISOString()),
    result: fc.constantFrom(...DRILL_RESULTS),
    failure: fc.oneof(fc.constant(null), fc.string({ minLength: 1, maxLength: 500 })),
    checks: fc.subarray([...DRILL_CHECKS]),
    ciphertextSizeBytes: count,
    ciphertextSha256: fc.oneof(fc.constant(null), hex(64)),
    plaintextSizeBytes: count,
    fileCount: count,
    vaultKey: hex(16),
    drilledBy: fc.record({ machine: fc.string({ maxLength: 255 }), client: fc.string({ maxLength: 64 }) }),
    later: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }),
  })
  .map((payload) => ({ ...payload, failure: payload.result === 'passed' ? null : (payload.failure ?? 'the archive does not open') }));

const encodeBody = (payload: unknown, mac = randomBytes(32)) => ({
  payload: Buffer.from(JSON.stringify(payload)).toString('base64'),
  mac: mac.toString('base64'),
});

const wrongValue = fc.oneof(
  fc.constantFrom(null, true, 0, -1, 1.5, '', 'x', [], {}, BACKUP.id.toUpperCase(), '2026-02-30T00:00:00Z', 'passed '),
  fc.jsonValue({ maxDepth: 2 }),
);

const PAYLOAD_MEMBERS = [
  'format',
  'accountId',
  'backupId',
  'checkedAt',
  'result',
  'failure',
  'checks',
  'ciphertextSizeBytes',
  'ciphertextSha256',
  'plaintextSizeBytes',
  'fileCount',
  'vaultKey',
  'drilledBy',
];

/** A valid payload with one member changed to anything, or removed. */
const mutatedPayload = fc
  .tuple(validPayload, fc.constantFrom(...PAYLOAD_MEMBERS), wrongValue, fc.boolean())
  .map(([payload, key, value, remove]) => {
    const copy: Record<string, unknown> = { ...payload };
    if (remove) delete copy[key];
    else copy[key] = value;
    return copy;
  });

const base64Text = fc.oneof(
  fc.uint8Array({ maxLength: 5000 }).map((b) => Buffer.from(b).toString('base64')),
  fc.string({ maxLength: 80 }),
  fc.string({ unit: fc.constantFrom(...'AZaz09+/=-_ \n'.split('')), maxLength: 80 }),
);

const hostileBody = fc.oneof(
  fc.anything(),
  fc.record({ payload: base64Text, mac: base64Text }),
  fc.tuple(mutatedPayload, fc.integer({ min: 0, max: 40 })).map(([payload, macBytes]) => encodeBody(payload, randomBytes(macBytes))),
  fc.tuple(validPayload, fc.uint8Array({ minLength: 0, maxLength: 40 })).map(([payload, mac]) => encodeBody(payload, Buffer.from(mac))),
  // The payload's bytes with one byte changed (not UTF-8, not JSON, another value).
  fc.tuple(validPayload, fc.nat(), fc.integer({ min: 0, max: 255 })).map(([payload, at, byte]) => {
    const bytes = Buffer.from(JSON.stringify(payload));
    bytes[at % bytes.length] = byte;
    return { payload: bytes.toString('base64'), mac: randomBytes(32).toString('base64') };
  }),
  // A valid payload naming another backup or account (any UUID, or this backup's ids swapped or in capitals).
  fc
    .tuple(
      validPayload,
      fc.constantFrom('accountId', 'backupId'),
      fc.oneof(fc.uuid(), fc.constantFrom(BACKUP.id, BACKUP.accountId, BACKUP.id.toUpperCase(), BACKUP.accountId.toUpperCase())),
    )
    .map(([payload, key, id]) => encodeBody({ ...payload, [key]: id })),
  // A valid payload padded with JSON whitespace to around the size limit.
  fc.tuple(validPayload, fc.integer({ min: MAX_PAYLOAD_BYTES - 8, max: MAX_PAYLOAD_BYTES + 8 })).map(([payload, size]) => ({
    payload: Buffer.from(JSON.stringify(payload).padEnd(size)).toString('base64'),
    mac: randomBytes(32).toString('base64'),
  })),
  // A valid payload's base64 with an unused bit of its last character set, when it has one (same bytes, not canonical).
  fc.tuple(validPayload, fc.integer({ min: 1, max: 15 })).map(([payload, bits]) => {
    const body = encodeBody(payload);
    const padding = body.payload.length - body.payload.replace(/=+$/, '').length;
    if (padding === 0) return body;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const at = body.payload.length - padding - 1;
    const last = alphabet.indexOf(body.payload[at]!) | (bits & (padding === 2 ? 15 : 3));
    return { ...body, payload: `${body.payload.slice(0, at)}${alphabet[last]}${'='.repeat(padding)}` };
  }),
  fc.tuple(validPayload, fc.constantFrom('__proto__', 'constructor', 'extra')).map(([payload, key]) => ({
    ...encodeBody(payload),
    [key]: { polluted: true },
  })),
);

describe('the check of an attestation request', () => {
  it('the domain limits are the contract’s', () => {
    expect(MAX_PAYLOAD_BYTES).toBe(MAX_ATTESTATION_PAYLOAD_BYTES);
    expect(MAC_BYTES).toBe(ATTESTATION_MAC_BYTES);
    expect([...ATTESTATION_RESULTS]).toEqual([...DRILL_RESULTS]);
  });

  it('valid requests come back as sent, with checkedAt and result read from the payload', () => {
    fc.assert(
      fc.property(validPayload, (payload) => {
        const body = encodeBody(payload);
        fc.pre(Buffer.from(body.payload, 'base64').length <= MAX_PAYLOAD_BYTES);
        expectStorable(check(body), body);
      }),
      { numRuns: RUNS },
    );
  });

  it('hostile bodies are refused with validation_failed naming a member, or pass every rule', () => {
    fc.assert(
      fc.property(hostileBody, (body) => {
        const checked = outcome(body);
        if (checked) expectStorable(checked, body as { payload: string; mac: string });
      }),
      { numRuns: RUNS * 3 },
    );
  });

  it('refuses the members it names', () => {
    const valid = encodeBody({
      format: 'coffer-attestation/v1',
      accountId: BACKUP.accountId,
      backupId: BACKUP.id,
      checkedAt: '2026-11-28T22:00:00Z',
      result: 'passed',
      failure: null,
      checks: ['download'],
      ciphertextSizeBytes: null,
      ciphertextSha256: null,
      plaintextSizeBytes: null,
      fileCount: null,
      vaultKey: '0123456789abcdef',
      drilledBy: { machine: 'm', client: 'c' },
    });
    const pathOf = (body: unknown) => {
      try {
        check(body);
        return 'accepted';
      } catch (error) {
        return ((error as AppError).details!.issues as { path: string }[])[0]!.path;
      }
    };
    expect(pathOf(valid)).toBe('accepted');
    expect(pathOf(null)).toBe('(body)');
    expect(pathOf({ mac: valid.mac })).toBe('payload');
    expect(pathOf({ ...valid, mac: randomBytes(31).toString('base64') })).toBe('mac');
    expect(pathOf({ ...valid, payload: Buffer.alloc(4097, 0x20).toString('base64') })).toBe('payload');
    expect(pathOf({ ...valid, payload: 'A'.repeat(8000) })).toBe('payload');
    expect(pathOf({ ...valid, payload: 'e31=' })).toBe('payload');
    const edit = (changes: Record<string, unknown>) => {
      const payload = { ...JSON.parse(Buffer.from(valid.payload, 'base64').toString()), ...changes };
      return pathOf({ ...valid, payload: Buffer.from(JSON.stringify(payload)).toString('base64') });
    };
    expect(edit({ backupId: '0190a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6e' })).toBe('payload.backupId');
    expect(edit({ accountId: BACKUP.id })).toBe('payload.accountId');
    expect(edit({ checkedAt: '2026-11-28 22:00:00Z' })).toBe('payload.checkedAt');
    expect(edit({ drilledBy: { machine: 1, client: 'c' } })).toBe('payload.drilledBy.machine');
    expect(edit({ format: 'x' })).toBe('payload.format');
    expect(edit({ checkedAt: '2026-11-28T23:00:00+01:00' })).toBe('payload.checkedAt');
    expect(edit({ result: 'passed', failure: 'the archive does not open' })).toBe('payload.failure');
    expect(edit({ result: 'failed', failure: null })).toBe('payload.failure');
  });
});

describe('RFC 3339 instants and strict base64', () => {
  it('parseInstant agrees with Date.parse on every instant toISOString writes, in any offset', () => {
    fc.assert(
      fc.property(instant, fc.integer({ min: -23 * 60 - 59, max: 23 * 60 + 59 }), (date, offsetMinutes) => {
        expect(parseInstant(date.toISOString())).toBe(date.getTime());
        const local = new Date(date.getTime() + offsetMinutes * 60_000).toISOString().slice(0, -1);
        const sign = offsetMinutes < 0 ? '-' : '+';
        const abs = Math.abs(offsetMinutes);
        const zone = `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
        fc.pre(!local.startsWith('-') && !local.startsWith('+'));
        expect(parseInstant(`${local}${zone}`)).toBe(date.getTime());
      }),
      { numRuns: RUNS },
    );
  });

  it('parseInstant refuses days and times that do not exist', () => {
    expect(parseInstant('2024-02-29T00:00:00Z')).toBe(Date.UTC(2024, 1, 29));
    expect(parseInstant('2000-02-29T00:00:00Z')).toBe(Date.UTC(2000, 1, 29));
    for (const text of [
      '2026-02-29T00:00:00Z',
      '1900-02-29T00:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-00-01T00:00:00Z',
      '2026-01-00T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-01-01T00:60:00Z',
      '2026-01-01T00:00:60Z',
      '2026-01-01T00:00:00+24:00',
      '2026-01-01T00:00:00',
      '2026-01-01t00:00:00z',
      '2026-01-01T00:00:00.Z',
      ' 2026-01-01T00:00:00Z',
    ]) {
      expect(parseInstant(text), text).toBeUndefined();
    }
  });

  it('decodeBase64Strict takes exactly the canonical padded encodings', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), (bytes) => {
        const text = Buffer.from(bytes).toString('base64');
        expect(Buffer.from(decodeBase64Strict(text, 'x')).equals(Buffer.from(bytes))).toBe(true);
      }),
      { numRuns: RUNS },
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (text) => {
        let decoded: Uint8Array | undefined;
        try {
          decoded = decodeBase64Strict(text, 'x');
        } catch (error) {
          expect((error as Error).constructor.name).toBe('Refusal');
          return;
        }
        expect(Buffer.from(decoded).toString('base64')).toBe(text);
      }),
      { numRuns: RUNS },
    );
  });

  it('the list limit is 1 to 1000, 200 by default', () => {
    expect(attestationListLimit(undefined)).toBe(200);
    expect(attestationListLimit('1')).toBe(1);
    expect(attestationListLimit('1000')).toBe(1000);
    expect(attestationListLimit('0042')).toBe(42);
    for (const text of ['0', '1001', '', '-1', '1e3', ' 5', '5 ', '0x10', '99999999']) {
      expect(() => attestationListLimit(text), text).toThrow(AppError);
    }
  });
});
