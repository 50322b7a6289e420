/** The supported Node range (package.json engines): one check in `coffer`, the same one before `npm start`'s build. */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import satisfies from 'semver/functions/satisfies.js';
import { describe, expect, it } from 'vitest';

const SUPPORTED_NODE = (JSON.parse(fs.readFileSync(path.resolve('package.json'), 'utf8')) as { engines: { node: string } }).engines.node;

const CASES: [string, boolean][] = [
  ['18.20.4', false],
  ['20.18.3', false],
  ['20.19.0', true],
  ['20.20.2', true],
  ['21.7.3', false],
  ['22.12.0', false],
  ['22.15.1', false],
  ['22.16.0', true],
  ['22.23.3', true],
  ['23.11.0', false],
  ['24.0.0', true],
  ['24.21.0', true],
  ['26.10.0', true],
  ['v30.1.0', true],
];

/** Runs a script on this Node, which reports `version` as its own. */
function runAs(version: string, args: string[]) {
  const pretend = `data:text/javascript,Object.defineProperty(process.versions,"node",{value:"${version}"})`;
  return spawnSync(process.execPath, ['--import', pretend, ...args], { encoding: 'utf8' });
}

describe('supported Node versions', () => {
  it('are 20.19+, 22.16+ and 24 onwards (package.json engines)', () => {
    for (const [version, supported] of CASES) expect([version, satisfies(version, SUPPORTED_NODE)]).toEqual([version, supported]);
    expect(satisfies(process.versions.node, SUPPORTED_NODE)).toBe(true);
  });

  it('an unsupported Node gets one line from coffer and from npm start, and exit code 1', () => {
    for (const entry of ['dist/cli/main.js', 'scripts/check-node.mjs']) {
      const refused = runAs('22.12.0', [entry, '--version']);
      expect([entry, refused.status, refused.stdout]).toEqual([entry, 1, '']);
      expect(refused.stderr).toBe(`coffer: Node.js 22.12.0 is not supported; use ${SUPPORTED_NODE}\n`);
    }
    const accepted = runAs('22.16.0', ['dist/cli/main.js', '--version']);
    expect([accepted.status, accepted.stderr]).toEqual([0, '']);
    expect(runAs('22.16.0', ['scripts/check-node.mjs'])).toMatchObject({ status: 0, stdout: '', stderr: '' });
  });
});
