/**
 * Restore attestations (src/client/attestation.ts, docs/crypto.md §7): the published vectors on both primitive
 * providers (sodium-native, the CLI's; libsodium.js, the console's), the writer reproducing them byte for byte, the
 * ring, every verdict (forged, mismatch, malformed, verified), the writer's refusals, and two properties: whatever the
 * server shows, verifyAttestation answers a verdict and never throws; a flipped bit in anything the verdict covers is
 * never verified. The writer's payloads also pass the server's schema (the contract's TypeBox, under Ajv with formats).
 */
import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import * as contract from '../../src/contract/attestation.js';
import { nodePrimitives } from '../../src/client/envelope.js';
import {
  ATTESTATION_FORMAT,
  ATTESTATION_MAC_BYTES,
  DRILL_CHECKS,
  MAX_ATTESTATION_PAYLOAD_BYTES,
  attestationMac,
  deriveAttestationKey,
  payloadProblem,
  signAttestation,
  vaultKeyOf,
  verifyAttestation,
  type AttestationBody,
  type AttestationPayloadBody,
  type DrillOutcome,
} from '../../src/client/attestation.js';
import type { Primitives } from '../../src/client/envelope-primitives.js';
import * as consoleCrypto from '../../console/src/crypto/envelope.js';
import { parseVectors } from '../../console/src/crypto/selftest.js';
import { ROOT } from './helpers.js';

/** §7's vectors, read as the console's Browser check reads them. */
const loadVectors = () => parseVectors(fs.readFileSync(path.join(ROOT, 'docs/crypto.md'), 'utf8')).attestation;

const hex = (value: string) => Uint8Array.from(Buffer.from(value, 'hex'));
const b64 = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64');
const key = (fill: number) => new Uint8Array(32).fill(fill);
const providers: [string, Primitives][] = [
  ['sodium-native', nodePrimitives],
  ['libsodium.js', consoleCrypto.webPrimitives],
];

beforeAll(async () => {
  await consoleCrypto.ready;
});

const outcome: DrillOutcome = {
  accountId: 'a77e5700-0000-4000-8000-0000000000a1',
  backupId: '01a2008c-0000-7000-8000-000000000001',
  checkedAt: new Date('2026-03-02T03:17:41.000Z'),
  result: 'passed',
  failure: null,
  checks: [...DRILL_CHECKS],
  ciphertextSizeBytes: 152,
  ciphertextSha256: '77448fd6a546c0639a89f416cd67559cfa3c96932a534cba2c121e4be3665713',
  plaintextSizeBytes: 2048,
  fileCount: 1,
  drilledBy: { machine: 'backup-host', client: 'coffer-cli/0.1.0' },
};

/** The server's view of a request it recorded for `drill`. */
function shownOf(request: { payload: string; mac: string }, drill: DrillOutcome = outcome): AttestationBody {
  return {
    id: 'a77e5700-0000-4000-8000-0000000000e1',
    accountId: drill.accountId,
    backupId: drill.backupId,
    recordedAt: '2026-03-02T03:17:42.500Z',
    recordedByKeyId: 'key-1',
    checkedAt: drill.checkedAt.toISOString(),
    result: drill.result,
    ...request,
  };
}

/** An attestation a key holder made of arbitrary payload bytes (a faulty writer). */
function madeBy(masterKey: Uint8Array, payload: Uint8Array | string, shown: Partial<AttestationBody> = {}): AttestationBody {
  const bytes = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
  const attestationKey = deriveAttestationKey(nodePrimitives, masterKey);
  return { ...shownOf({ payload: b64(bytes), mac: b64(attestationMac(attestationKey, bytes)) }), ...shown };
}

/** Ajv with ajv-formats (full mode), as Fastify validates the server's bodies. */
function serverAjv(): Ajv {
  const ajv = new Ajv({ strict: false });
  (addFormats as unknown as { default: (instance: Ajv) => void }).default(ajv);
  return ajv;
}

function validPayload(masterKey: Uint8Array): AttestationPayloadBody {
  const request = signAttestation(nodePrimitives, masterKey, outcome);
  return JSON.parse(Buffer.from(request.payload, 'base64').toString('utf8')) as AttestationPayloadBody;
}

describe('docs/crypto.md §7 test vectors', () => {
  const v = loadVectors();

  it('are the four cases the document describes', () => {
    expect(v.attestations.map((vector) => vector.verdict)).toEqual(['verified', 'verified', 'forged', 'mismatch']);
    expect(v.attestations[1]!.ring).toHaveLength(2);
    expect(v.attestations[1]!.signedBy).toBe(1);
  });

  it.each(providers)('derive each attestation key and vaultKey on %s', (_name, p) => {
    for (const entry of v.keys) {
      const attestationKey = deriveAttestationKey(p, hex(entry.masterKey));
      expect(Buffer.from(attestationKey).toString('hex')).toBe(entry.attestationKey);
      expect(vaultKeyOf(p, attestationKey)).toBe(entry.vaultKey);
    }
  });

  it.each(providers)('give every published verdict on %s', (_name, p) => {
    for (const vector of v.attestations) {
      expect(Buffer.from(vector.shown.payload, 'base64').toString('utf8'), vector.name).toBe(vector.payloadText);
      expect(Buffer.from(vector.shown.mac, 'base64').toString('hex'), vector.name).toBe(vector.macHex);
      const verdict = verifyAttestation(p, vector.ring.map(hex), vector.shown);
      expect(verdict.status, vector.name).toBe(vector.verdict);
      if (verdict.status === 'verified' || verdict.status === 'mismatch') {
        expect(verdict.payload).toEqual(JSON.parse(vector.payloadText));
      }
    }
  });

  it.each(providers)('are what the writer makes, byte for byte, on %s', (_name, p) => {
    for (const vector of v.attestations.filter((entry) => entry.verdict === 'verified')) {
      const payload = JSON.parse(vector.payloadText) as AttestationPayloadBody;
      const drill: DrillOutcome = { ...payload, checkedAt: new Date(payload.checkedAt), checks: payload.checks as DrillOutcome['checks'] };
      const request = signAttestation(p, hex(vector.ring[vector.signedBy!]!), drill);
      expect(request).toEqual({ payload: vector.shown.payload, mac: vector.shown.mac });
    }
  });

  it('the signer of a verified vector is the key its vaultKey names, and no other key of the ring verifies it', () => {
    for (const vector of v.attestations.filter((entry) => entry.verdict === 'verified')) {
      const signer = vector.ring[vector.signedBy!]!;
      expect(JSON.parse(vector.payloadText).vaultKey).toBe(v.keys.find((entry) => entry.masterKey === signer)!.vaultKey);
      for (const other of vector.ring.filter((candidate) => candidate !== signer)) {
        expect(verifyAttestation(nodePrimitives, [hex(other)], vector.shown).status).toBe('forged');
      }
    }
  });
});

describe('the shapes the contract declares', () => {
  it('has the constants of src/contract/attestation.ts', () => {
    expect(ATTESTATION_FORMAT).toBe(contract.ATTESTATION_FORMAT);
    expect(DRILL_CHECKS).toEqual(contract.DRILL_CHECKS);
    expect(MAX_ATTESTATION_PAYLOAD_BYTES).toBe(contract.MAX_ATTESTATION_PAYLOAD_BYTES);
    expect(ATTESTATION_MAC_BYTES).toBe(contract.ATTESTATION_MAC_BYTES);
  });

  it('writes payloads and requests the server accepts (the contract schemas under Ajv with formats), for any drill', () => {
    const ajv = serverAjv();
    const payloadValid = ajv.compile(contract.AttestationPayload);
    const requestValid = ajv.compile(contract.AttestationRequest);
    fc.assert(
      fc.property(drillArbitrary, (drill) => {
        const request = signAttestation(nodePrimitives, key(7), drill);
        const payload: unknown = JSON.parse(Buffer.from(request.payload, 'base64').toString('utf8'));
        expect(requestValid(request), JSON.stringify(requestValid.errors)).toBe(true);
        expect(payloadValid(payload), JSON.stringify(payloadValid.errors)).toBe(true);
        expect(payloadProblem(payload)).toBe('');
      }),
      { numRuns: 200 },
    );
  });

  it('finds nothing wrong only in payloads the server schema accepts too (the reader is at least as strict)', () => {
    const ajv = serverAjv();
    const payloadValid = ajv.compile(contract.AttestationPayload);
    fc.assert(
      fc.property(payloadLikeArbitrary, (payload) => {
        if (payloadProblem(payload) === '') expect(payloadValid(payload), JSON.stringify(payload)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('signAttestation and verifyAttestation', () => {
  it.each(providers)('round-trips on %s, and the other provider reads it', (_name, p) => {
    const request = signAttestation(p, key(1), outcome);
    expect(Buffer.from(request.mac, 'base64')).toHaveLength(ATTESTATION_MAC_BYTES);
    for (const [, reader] of providers) {
      const verdict = verifyAttestation(reader, [key(1)], shownOf(request));
      expect(verdict).toEqual({ status: 'verified', payload: validPayload(key(1)) });
    }
  });

  it('the console re-exports the same functions (console/src/crypto/envelope.ts)', () => {
    expect(consoleCrypto.signAttestation).toBe(signAttestation);
    expect(consoleCrypto.verifyAttestation).toBe(verifyAttestation);
  });

  it('tries every key of the ring: the current key and an older one verify, a key outside the ring does not', () => {
    const ring = [key(2), key(1)];
    expect(verifyAttestation(nodePrimitives, ring, shownOf(signAttestation(nodePrimitives, key(2), outcome))).status).toBe('verified');
    expect(verifyAttestation(nodePrimitives, ring, shownOf(signAttestation(nodePrimitives, key(1), outcome))).status).toBe('verified');
    expect(verifyAttestation(nodePrimitives, ring, shownOf(signAttestation(nodePrimitives, key(3), outcome)))).toEqual({
      status: 'forged',
      reason: expect.stringMatching(/no key of this vault/),
    });
    expect(verifyAttestation(nodePrimitives, [], shownOf(signAttestation(nodePrimitives, key(1), outcome))).status).toBe('forged');
  });

  it('names the key that made it (vaultKey) and keeps it apart from the recipient seed (another KDF context)', () => {
    const payload = validPayload(key(1));
    expect(payload.vaultKey).toBe(vaultKeyOf(nodePrimitives, deriveAttestationKey(nodePrimitives, key(1))));
    expect(payload.vaultKey).not.toBe(validPayload(key(2)).vaultKey);
    const seed = nodePrimitives.alloc(32);
    nodePrimitives.kdfDerive(seed, 1, 'cofferxw', key(1));
    expect(Buffer.from(deriveAttestationKey(nodePrimitives, key(1))).equals(seed)).toBe(false);
  });

  it('forged: an altered payload, an altered or truncated mac, bytes that are not canonical base64', () => {
    const shown = shownOf(signAttestation(nodePrimitives, key(1), outcome));
    const payloadBytes = Buffer.from(shown.payload, 'base64');
    const altered = Buffer.from(payloadBytes.toString('utf8').replace('"fileCount":1', '"fileCount":9'));
    const mac = Buffer.from(shown.mac, 'base64');
    const cases: Partial<AttestationBody>[] = [
      { payload: b64(altered) },
      { mac: b64(Buffer.concat([mac.subarray(0, 31), Buffer.from([mac[31]! ^ 1])])) },
      { mac: b64(mac.subarray(0, 31)) },
      { mac: b64(Buffer.concat([mac, Buffer.from([0])])) },
      { mac: shown.mac.replace(/=$/, '') },
      { payload: `${shown.payload} ` },
      { payload: '' },
      // the same bytes written with non-zero unused bits in the last base64 character: refused, not decoded leniently
      { mac: `${shown.mac.slice(0, 42)}${String.fromCharCode(shown.mac.charCodeAt(42) + 1)}=` },
    ];
    for (const change of cases) {
      expect(verifyAttestation(nodePrimitives, [key(1)], { ...shown, ...change }).status, JSON.stringify(change)).toBe('forged');
    }
  });

  it('mismatch: the server shows an authentic attestation under another account, backup, time or result', () => {
    const shown = shownOf(signAttestation(nodePrimitives, key(1), outcome));
    const relabellings: [Partial<AttestationBody>, string][] = [
      [{ accountId: 'a77e5700-0000-4000-8000-0000000000a2' }, 'accountId'],
      [{ backupId: '01a2008c-0000-7000-8000-000000000002' }, 'backupId'],
      [{ backupId: outcome.backupId.toUpperCase() }, 'backupId'],
      [{ checkedAt: '2026-03-02T03:17:41.001Z' }, 'checkedAt'],
      [{ checkedAt: 'Mon, 02 Mar 2026 03:17:41 GMT' }, 'checkedAt'],
      [{ result: 'failed' }, 'result'],
      [{ backupId: '01a2008c-0000-7000-8000-000000000002', result: 'failed' }, 'backupId, result'],
    ];
    for (const [change, named] of relabellings) {
      const verdict = verifyAttestation(nodePrimitives, [key(1)], { ...shown, ...change });
      expect(verdict, named).toEqual({ status: 'mismatch', reason: expect.stringContaining(named), payload: validPayload(key(1)) });
    }
  });

  it("verified: the server's own members and its way of writing the same instant do not matter", () => {
    const shown = shownOf(signAttestation(nodePrimitives, key(1), outcome));
    const same: Partial<AttestationBody>[] = [
      { id: 'another', recordedAt: '2030-01-01T00:00:00.000Z', recordedByKeyId: 'k' },
      { checkedAt: '2026-03-02T03:17:41Z' },
      { checkedAt: '2026-03-02T03:17:41.000000Z' },
    ];
    for (const change of same) expect(verifyAttestation(nodePrimitives, [key(1)], { ...shown, ...change }).status).toBe('verified');
  });

  it('malformed: a key holder made it, but the payload breaks the format', () => {
    const good = validPayload(key(1));
    const json = (change: Record<string, unknown>) => JSON.stringify({ ...good, ...change });
    const cases: [Uint8Array | string, RegExp][] = [
      ['not json', /not UTF-8 JSON/],
      [Buffer.from([0xff, 0xfe, 0x7b, 0x7d]), /not UTF-8 JSON/],
      [`\ufeff${JSON.stringify(good)}`, /not UTF-8 JSON/],
      ['[]', /not a JSON object/],
      ['null', /not a JSON object/],
      [json({ format: 'coffer-attestation/v2' }), /newer coffer/],
      [json({ format: undefined }), /format is not/],
      [json({ vaultKey: validPayload(key(2)).vaultKey }), /names key .* but key .* made/],
      [json({ backupId: outcome.backupId.toUpperCase() }), /backupId is not a lower-case UUID/],
      [json({ accountId: `urn:uuid:${outcome.accountId}` }), /accountId/],
      [json({ checkedAt: '2026-02-30T00:00:00.000Z' }), /checkedAt/],
      [json({ checkedAt: '2026-03-02T24:00:00.000Z' }), /checkedAt/],
      [json({ checkedAt: '2026-03-02T03:17:41.000+00:00' }), /checkedAt/],
      [json({ result: 'ok' }), /result/],
      [json({ failure: 'it failed' }), /a passed drill has no failure/],
      [json({ result: 'failed' }), /a passed drill has no failure/],
      [json({ result: 'failed', failure: '' }), /failure/],
      [json({ checks: ['Download'] }), /checks/],
      [json({ checks: Array.from({ length: 17 }, () => 'sha256') }), /checks/],
      [json({ fileCount: -1 }), /fileCount/],
      [json({ fileCount: 1.5 }), /fileCount/],
      [json({ plaintextSizeBytes: 2 ** 53 }), /plaintextSizeBytes/],
      [json({ ciphertextSizeBytes: '152' }), /ciphertextSizeBytes/],
      [json({ ciphertextSha256: 'A'.repeat(64) }), /ciphertextSha256/],
      [json({ drilledBy: { machine: 'm' } }), /drilledBy/],
      [json({ drilledBy: { machine: 'm'.repeat(256), client: 'c' } }), /drilledBy/],
      [json({ extra: 'x'.repeat(MAX_ATTESTATION_PAYLOAD_BYTES) }), /over 4096/],
    ];
    for (const [payload, reason] of cases) {
      const verdict = verifyAttestation(nodePrimitives, [key(1)], madeBy(key(1), payload));
      expect(verdict, String(payload).slice(0, 80)).toEqual({ status: 'malformed', reason: expect.stringMatching(reason) });
    }
  });

  it('reads members it does not know, in any order and with any white space (the bytes are what is authenticated)', () => {
    const good = validPayload(key(1));
    const reordered = Object.fromEntries(Object.entries({ ...good, later: { member: 1 } }).reverse());
    const verdict = verifyAttestation(nodePrimitives, [key(1)], madeBy(key(1), JSON.stringify(reordered, null, 2)));
    expect(verdict).toEqual({ status: 'verified', payload: reordered });
  });

  it('refuses to sign a drill the format cannot carry, and signs nothing', () => {
    const refused: [Partial<DrillOutcome>, RegExp][] = [
      [{ backupId: 'not-a-uuid' }, /backupId/],
      [{ result: 'failed' }, /failure/],
      [{ failure: 'x'.repeat(501), result: 'failed' }, /failure/],
      [{ ciphertextSha256: 'xyz' }, /ciphertextSha256/],
      [{ fileCount: -1 }, /fileCount/],
      [{ drilledBy: { machine: 'm'.repeat(256), client: 'c' } }, /drilledBy/],
      [{ checks: ['no such check!' as never] }, /checks/],
    ];
    for (const [change, reason] of refused) {
      expect(() => signAttestation(nodePrimitives, key(1), { ...outcome, ...change }), reason.source).toThrow(reason);
    }
    expect(() => signAttestation(nodePrimitives, key(1), { ...outcome, checkedAt: new Date(NaN) })).toThrow(RangeError);
    expect(() => signAttestation(nodePrimitives, new Uint8Array(16), outcome)).toThrow(/32 bytes/);
    // An upper-case id is written in lower case, as the server shows ids.
    const upper = signAttestation(nodePrimitives, key(1), { ...outcome, backupId: outcome.backupId.toUpperCase() });
    expect(verifyAttestation(nodePrimitives, [key(1)], shownOf(upper)).status).toBe('verified');
  });
});

// ---- properties ----

const uuid = fc.uuid().map((id) => id.toLowerCase());
const count = fc.oneof(fc.constant(null), fc.nat(), fc.constant(Number.MAX_SAFE_INTEGER));
const drillArbitrary: fc.Arbitrary<DrillOutcome> = fc
  .record({
    accountId: uuid,
    backupId: uuid,
    checkedAt: fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }),
    failure: fc.option(
      fc.string({ minLength: 1, maxLength: 500, unit: 'grapheme' }).filter((text) => text.length <= 500),
      { nil: null },
    ),
    checks: fc.subarray([...DRILL_CHECKS]),
    ciphertextSizeBytes: count,
    ciphertextSha256: fc.option(
      fc.uint8Array({ minLength: 32, maxLength: 32 }).map((bytes) => Buffer.from(bytes).toString('hex')),
      { nil: null },
    ),
    plaintextSizeBytes: count,
    fileCount: count,
    machine: fc.string({ maxLength: 255, unit: 'binary' }),
    client: fc.string({ maxLength: 64 }),
  })
  .map(({ machine, client, failure, ...rest }) => ({
    ...rest,
    result: failure === null ? ('passed' as const) : ('failed' as const),
    failure,
    drilledBy: { machine, client },
  }))
  .filter((drill) => drill.drilledBy.machine.length <= 255);

/** Payload-like objects: each member valid or not, some left out, some extra. */
const payloadLikeArbitrary = fc
  .record(
    {
      format: fc.constantFrom(ATTESTATION_FORMAT, 'coffer-attestation/v2', 1),
      accountId: fc.oneof(
        uuid,
        fc.uuid().map((id) => id.toUpperCase()),
        fc.string(),
      ),
      backupId: fc.oneof(uuid, fc.constant('urn:uuid:01a2008c-0000-7000-8000-000000000001'), fc.string()),
      checkedAt: fc.oneof(
        fc.date({ noInvalidDate: true, min: new Date(0), max: new Date('9999-12-31T23:59:59Z') }).map((date) => date.toISOString()),
        fc.constantFrom('2026-02-30T00:00:00Z', '2026-03-02t03:17:41z', '2026-03-02 03:17:41Z', '2026-03-02T03:17:41+01:00', 'now'),
      ),
      result: fc.constantFrom('passed', 'failed', 'PASSED', null),
      failure: fc.oneof(fc.constant(null), fc.string({ maxLength: 510 }), fc.constant(0)),
      checks: fc.oneof(fc.subarray([...DRILL_CHECKS]), fc.array(fc.string({ maxLength: 40 }), { maxLength: 20 })),
      ciphertextSizeBytes: fc.oneof(count, fc.double(), fc.constant(-1)),
      ciphertextSha256: fc.oneof(fc.constant(null), fc.stringMatching(/^[0-9a-fA-F]{63,65}$/)),
      plaintextSizeBytes: fc.oneof(count, fc.constant(2 ** 53)),
      fileCount: fc.oneof(count, fc.constant('1')),
      vaultKey: fc.oneof(fc.stringMatching(/^[0-9a-f]{16}$/), fc.string({ maxLength: 17 })),
      drilledBy: fc.oneof(
        fc.record({ machine: fc.string({ maxLength: 260 }), client: fc.string({ maxLength: 70 }) }),
        fc.record({ machine: fc.string() }),
        fc.constant(null),
      ),
      extra: fc.anything(),
    },
    { requiredKeys: [] },
  )
  .map((payload) => payload as Record<string, unknown>);

describe('properties', () => {
  const request = signAttestation(nodePrimitives, key(1), outcome);
  const authentic = shownOf(request);

  it('any shown object gives a verdict and never throws (hostile strings, shapes, base64 of anything)', () => {
    const base64ish = fc.oneof(
      fc.string(),
      fc.base64String(),
      fc.uint8Array({ maxLength: 5000 }).map((bytes) => b64(bytes)),
      fc.constantFrom(request.payload, request.mac, '====', 'A==='),
    );
    const shownArbitrary = fc.oneof(
      fc.anything(),
      fc.record(
        {
          id: fc.anything(),
          accountId: fc.oneof(fc.anything(), fc.constant(outcome.accountId)),
          backupId: fc.oneof(fc.anything(), fc.constant(outcome.backupId)),
          checkedAt: fc.oneof(fc.anything(), fc.string(), fc.constant(authentic.checkedAt)),
          result: fc.oneof(fc.anything(), fc.constantFrom('passed', 'failed')),
          payload: fc.oneof(base64ish, fc.anything()),
          mac: fc.oneof(base64ish, fc.anything()),
        },
        { requiredKeys: [] },
      ),
      // authentic macs over arbitrary payload bytes: the reader's parsing meets anything a key holder could write
      fc
        .oneof(
          fc.uint8Array({ maxLength: 600 }),
          fc.json().map((text) => Buffer.from(text)),
          payloadLikeArbitrary.map((p) => Buffer.from(JSON.stringify(p))),
        )
        .map((bytes) => madeBy(key(1), bytes)),
    );
    fc.assert(
      fc.property(shownArbitrary, fc.constantFrom(...providers), (shown, [, p]) => {
        const verdict = verifyAttestation(p, [key(2), key(1)], shown as AttestationBody);
        expect(['verified', 'forged', 'mismatch', 'malformed']).toContain(verdict.status);
        if (verdict.status === 'verified') expect(payloadProblem(verdict.payload)).toBe('');
      }),
      { numRuns: 1500 },
    );
  });

  it('a flipped bit anywhere in the payload, the mac or the labels the verdict covers is never verified', () => {
    const covered = ['payload', 'mac', 'accountId', 'backupId', 'checkedAt', 'result'] as const;
    const signed = fc.tuple(drillArbitrary, fc.constantFrom(key(1), key(2))).map(([drill, masterKey]) => ({
      drill,
      masterKey,
      shown: shownOf(signAttestation(nodePrimitives, masterKey, drill), drill),
    }));
    fc.assert(
      fc.property(
        signed,
        fc.constantFrom(...covered),
        fc.nat(),
        fc.nat(15),
        fc.boolean(),
        ({ masterKey, shown }, member, at, bit, inBytes) => {
          expect(verifyAttestation(nodePrimitives, [key(2), key(1)], shown).status).toBe('verified');
          const changed = { ...shown };
          if (inBytes && (member === 'payload' || member === 'mac')) {
            const bytes = Buffer.from(shown[member], 'base64');
            bytes[at % bytes.length]! ^= 1 << (bit % 8);
            changed[member] = b64(bytes);
          } else {
            const text = shown[member];
            const index = at % text.length;
            const flipped = String.fromCharCode(text.charCodeAt(index) ^ (1 << bit));
            changed[member] = (text.slice(0, index) + flipped + text.slice(index + 1)) as never;
          }
          const verdict = verifyAttestation(nodePrimitives, [masterKey], changed);
          expect(verdict.status).not.toBe('verified');
        },
      ),
      { numRuns: 1500 },
    );
  });
});
