/**
 * Generates the restore-attestation vectors of docs/crypto.md §7 (run: npx vite-node test/client/attestation.vectors.gen.ts).
 * The master keys are §6's (`masterKey`, and the `keyring` vector's two keys); everything is fixed, so every value is
 * reproducible. test/client/attestation.test.ts checks the published values against the code and
 * test/client/vectors_libsodium.py recomputes them independently.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { nodePrimitives } from '../../src/client/envelope.js';
import {
  deriveAttestationKey,
  signAttestation,
  vaultKeyOf,
  verifyAttestation,
  type AttestationBody,
  type DrillOutcome,
} from '../../src/client/attestation.js';

const doc = fs.readFileSync(path.join(import.meta.dirname, '../../docs/crypto.md'), 'utf8');
const envelope = JSON.parse(/<!-- test-vectors[^>]*-->\s*```json\n([\s\S]*?)\n```/.exec(doc)![1]!);
const hex = (value: string) => Buffer.from(value, 'hex');
const masterKey: string = envelope.masterKey;
const ring: string[] = envelope.keyring.keys; // [key_0 (current), key_1 = masterKey]
const archive = Buffer.from(envelope.archive.ciphertext, 'base64');

const accountId = 'a77e5700-0000-4000-8000-0000000000a1';
const passed: DrillOutcome = {
  accountId,
  backupId: envelope.backupId,
  checkedAt: new Date('2026-03-02T03:17:41.000Z'),
  result: 'passed',
  failure: null,
  checks: ['download', 'decrypt', 'decompress', 'archive', 'sizes', 'sha256'],
  ciphertextSizeBytes: archive.length,
  ciphertextSha256: createHash('sha256').update(archive).digest('hex'),
  plaintextSizeBytes: envelope.archive.plaintextSizeBytes,
  fileCount: 1,
  drilledBy: { machine: 'backup-host', client: 'coffer-cli/0.1.0' },
};
const failed: DrillOutcome = {
  accountId,
  backupId: '01a2008c-0000-7000-8000-000000000002',
  checkedAt: new Date('2026-03-09T03:18:02.500Z'),
  result: 'failed',
  failure: "the archive's SHA-256 does not match its metadata",
  checks: ['download', 'decrypt', 'decompress', 'archive', 'sizes'],
  ciphertextSizeBytes: archive.length,
  ciphertextSha256: createHash('sha256').update(archive).digest('hex'),
  plaintextSizeBytes: envelope.archive.plaintextSizeBytes,
  fileCount: 1,
  drilledBy: { machine: 'Büro-NAS ☕', client: 'coffer-agent/0.1.0' },
};

/** The server's view of an attestation it recorded (what GET …/attestations answers). */
function shownOf(outcome: DrillOutcome, request: { payload: string; mac: string }, id: string): AttestationBody {
  return {
    id,
    accountId: outcome.accountId,
    backupId: outcome.backupId,
    recordedAt: new Date(outcome.checkedAt.getTime() + 1500).toISOString(),
    recordedByKeyId: 'c0ffee00-0000-4000-8000-00000000000b',
    checkedAt: outcome.checkedAt.toISOString(),
    result: outcome.result,
    payload: request.payload,
    mac: request.mac,
  };
}

function vector(name: string, keys: string[], shown: AttestationBody, extra: Record<string, unknown> = {}) {
  const verdict = verifyAttestation(nodePrimitives, keys.map(hex), shown);
  return {
    name,
    ring: keys,
    ...extra,
    payloadText: Buffer.from(shown.payload, 'base64').toString('utf8'),
    macHex: Buffer.from(shown.mac, 'base64').toString('hex'),
    shown,
    verdict: verdict.status,
  };
}

const passedRequest = signAttestation(nodePrimitives, hex(masterKey), passed);
const failedRequest = signAttestation(nodePrimitives, hex(ring[1]!), failed);
const passedShown = shownOf(passed, passedRequest, 'a77e5700-0000-4000-8000-0000000000e1');
const alteredText = Buffer.from(passedRequest.payload, 'base64').toString('utf8').replace('"fileCount":1', '"fileCount":2');

const vectors = {
  keys: [ring[0]!, masterKey].map((key) => {
    const attestationKey = deriveAttestationKey(nodePrimitives, hex(key));
    return { masterKey: key, attestationKey: attestationKey.toString('hex'), vaultKey: vaultKeyOf(nodePrimitives, attestationKey) };
  }),
  attestations: [
    vector('a passed drill, a vault of one key', [masterKey], passedShown, { signedBy: 0 }),
    vector(
      'a failed drill made by key_1 (before a rekey), read with the ring',
      ring,
      shownOf(failed, failedRequest, 'a77e5700-0000-4000-8000-0000000000e2'),
      {
        signedBy: 1,
      },
    ),
    vector('the first payload altered (fileCount 1 to 2) under its mac', [masterKey], {
      ...passedShown,
      payload: Buffer.from(alteredText, 'utf8').toString('base64'),
    }),
    vector('the first attestation shown by the server under another backup', [masterKey], {
      ...passedShown,
      backupId: failed.backupId,
    }),
  ],
};
process.stdout.write(`${JSON.stringify(vectors, null, 2)}\n`);
