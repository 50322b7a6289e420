/**
 * deploy/coffer.service (docs/deploy.md#as-a-system-service) passes `systemd-analyze verify` without a single
 * warning. verify insists that ExecStart's program exists, and /usr/bin/node is not on every machine: it checks a
 * copy in a temp dir whose ExecStart names the node running this test; nothing else is changed. What this cannot
 * show: that the sandbox lets Node run (that needs a running systemd). Skipped without systemd-analyze, unless
 * COFFER_REQUIRE_PG=1 (.ci/run installs it): then it fails.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';
import { lacking } from '../helpers/required.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const UNIT = fs.readFileSync(path.join(ROOT, 'deploy/coffer.service'), 'utf8');
const ENV_FILE = fs.readFileSync(path.join(ROOT, 'deploy/coffer.env'), 'utf8');
const ANALYZE = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((file) => fs.existsSync(file));

it('docs/deploy.md shows deploy/coffer.service and deploy/coffer.env verbatim', () => {
  const doc = fs.readFileSync(path.join(ROOT, 'docs/deploy.md'), 'utf8');
  expect(doc).toContain('```ini\n' + UNIT + '```\n');
  expect(doc).toContain('```sh\n' + ENV_FILE + '```\n');
});

/** `systemd-analyze verify` of `unit` saved as coffer.service, with ExecStart's node replaced; exit code and all output. */
function verify(unit: string): { status: number | null; output: string } {
  const documented = 'ExecStart=/usr/bin/node ';
  expect(unit).toContain(documented);
  const file = path.join(tempDir('coffer-unit-'), 'coffer.service');
  fs.writeFileSync(file, unit.replace(documented, `ExecStart=${process.execPath} `));
  const result = spawnSync(ANALYZE!, ['verify', file], { encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}`.trim() };
}

describe.skipIf(lacking(ANALYZE !== undefined, 'systemd-analyze'))('deploy/coffer.service', () => {
  it('passes systemd-analyze verify with no warning', () => {
    if (!ANALYZE) throw new Error('systemd-analyze is missing (apt-get install systemd; the run requires it)');
    expect(verify(UNIT)).toEqual({ status: 0, output: '' });
  });

  it('a misspelt or invalid line is reported (so the check above can fail)', () => {
    if (!ANALYZE) throw new Error('systemd-analyze is missing');
    const broken = verify(UNIT.replace('NoNewPrivileges=yes', 'NoNewPrivileges=perhaps').replace('ProtectHome=yes', 'ProtectHomes=yes'));
    expect(broken.output).toContain('Failed to parse boolean value, ignoring: perhaps');
    expect(broken.output).toContain("Unknown key 'ProtectHomes'");
  });

  it('runs as its own user with the usual sandboxing', () => {
    const lines = new Set(UNIT.split('\n'));
    for (const line of [
      'User=coffer',
      'StateDirectory=coffer',
      'EnvironmentFile=/etc/coffer/coffer.env',
      'Restart=on-failure',
      'NoNewPrivileges=yes',
      'ProtectSystem=strict',
      'ProtectHome=yes',
      'PrivateTmp=yes',
      'PrivateDevices=yes',
      'ProtectKernelTunables=yes',
      'ProtectKernelModules=yes',
      'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX',
      'SystemCallFilter=@system-service',
      'CapabilityBoundingSet=',
    ]) {
      expect(lines.has(line), line).toBe(true);
    }
  });
});
