/**
 * Recording a restore drill's attestation through the real API (POST /api/backups/{id}/attestations), as a drilling
 * client does: a payload in the shape of src/contract/attestation.ts and an HMAC under a key of the test's own (the
 * server cannot check it).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { DRILL_CHECKS } from '../../src/contract/attestation.js';

type Call = (method: string, path: string, options?: { json?: unknown }) => Promise<{ status: number; text: string }>;

const DRILL_KEY = randomBytes(32);

/** Records that `backup` was drilled with `result`; the drilling machine is named `machine` (a canary, if wanted). */
export async function recordDrill(
  call: Call,
  backup: { id: string; accountId: string },
  result: 'passed' | 'failed',
  machine: string,
): Promise<void> {
  const payload = Buffer.from(
    JSON.stringify({
      format: 'coffer-attestation/v1',
      accountId: backup.accountId,
      backupId: backup.id,
      checkedAt: new Date().toISOString(),
      result,
      failure: result === 'failed' ? 'the archive’s SHA-256 does not match' : null,
      checks: result === 'failed' ? DRILL_CHECKS.slice(0, 4) : [...DRILL_CHECKS],
      ciphertextSizeBytes: 1000,
      ciphertextSha256: 'ab'.repeat(32),
      plaintextSizeBytes: 900,
      fileCount: 3,
      vaultKey: '0123456789abcdef',
      drilledBy: { machine, client: 'coffer-cli/0.1.0' },
    }),
  );
  const mac = createHmac('sha256', DRILL_KEY).update(payload).digest('base64');
  const recorded = await call('POST', `/api/backups/${backup.id}/attestations`, { json: { payload: payload.toString('base64'), mac } });
  expect(recorded.status, recorded.text).toBe(201);
}
