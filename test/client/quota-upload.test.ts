/**
 * An upload over the account's storage quota, through the real CLI against a real server: the server's 413
 * `upload_exceeds_quota` is what the user reads, whether the refusal came after a few bytes or while tens of MB
 * were still being sent (the server answers and closes mid-stream; the client must still read that answer).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { assertBuilt, cliFor, type Cli } from './helpers.js';

const QUOTA = 1_000_000;

let server: TestServer;
let cli: Cli;
let work: string;

beforeAll(async () => {
  assertBuilt();
  server = await startTestServer({ env: { COFFER_QUOTA_PRO: String(QUOTA) } });
  const { apiKey } = await server.newKey({ plan: 'pro' });
  cli = cliFor(server.url, apiKey, 'quota passphrase');
  const init = await cli(['init']);
  expect(init.code, init.stderr).toBe(0);
  work = tempDir('coffer-quota-upload-');
});

afterAll(async () => {
  await server?.stop();
});

describe('an upload over the storage quota', () => {
  for (const [label, size] of [
    ['1.5 MB', 1_500_000],
    ['40 MB', 40_000_000],
  ] as const) {
    it(`a ${label} backup names the quota (not "Premature close"), exit 1, nothing stored`, async () => {
      const dir = path.join(work, label.replace(/\W+/g, '-'));
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'random.bin'), randomBytes(size)); // incompressible
      const result = await cli(['backup', dir]);
      expect(result.stderr).not.toMatch(/Premature close|EPIPE|ECONNRESET|upload to .* failed/);
      // The same words for both sizes: the server's refusal, with the quota's figures.
      expect(result.stderr).toContain(
        `coffer: the server refused (upload_exceeds_quota): This upload does not fit in the quota: ${QUOTA} of ${QUOTA} bytes are left.`,
      );
      expect(result.code).toBe(1);
      const listed = await cli(['list', '--json']);
      expect(JSON.parse(listed.stdout).backups.filter((b: { status: string }) => b.status === 'READY')).toEqual([]);
    }, 120_000);
  }
});
