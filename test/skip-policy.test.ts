/**
 * The one skip policy (test/helpers/required.ts): which requirements an environment sets, and a test file run by
 * vitest without the tools it needs: each test skipped (shown as skipped) unless the run requires that very tool.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REQUIREMENTS, requirementsOf } from './helpers/required.js';
import { endsWithTest } from './helpers/children.js';
import { tempDir } from './helpers/tmp.js';

describe('which requirements an environment sets', () => {
  it('nothing by default, nor with CI=false, 0 or empty', () => {
    for (const CI of [undefined, 'false', 'FALSE', '0', '']) expect([...requirementsOf({ CI })]).toEqual([]);
  });

  it('CI=true or 1, and COFFER_REQUIRE=all, require every tool, and nothing that depends on the Node version', () => {
    for (const env of [{ CI: 'true' }, { CI: '1' }, { COFFER_REQUIRE: 'all' }]) {
      expect([...requirementsOf(env)].sort()).toEqual([...REQUIREMENTS].sort());
    }
  });

  it('each requirement is its own: COFFER_REQUIRE_PG=1 requires PostgreSQL and nothing else', () => {
    expect([...requirementsOf({ COFFER_REQUIRE_PG: '1' })]).toEqual(['postgres']);
    expect([...requirementsOf({ COFFER_REQUIRE_CEPH: '1' })]).toEqual(['ceph']);
    expect([...requirementsOf({ COFFER_REQUIRE: 'zsh, fish sqlite:node,node:zstd' })].sort()).toEqual(
      ['fish', 'node:zstd', 'sqlite:node', 'zsh'].sort(),
    );
  });

  it('a list in COFFER_REQUIRE is not overruled by CI=true (the Node 24 pass names no podman)', () => {
    expect([...requirementsOf({ CI: 'true', COFFER_REQUIRE: 'postgres,sqlite:node' })].sort()).toEqual(['postgres', 'sqlite:node']);
    expect([...requirementsOf({ CI: 'true', COFFER_REQUIRE: 'all,sqlite:node' })].sort()).toEqual([...REQUIREMENTS, 'sqlite:node'].sort());
  });
});

const NOTHING_REQUIRED = { CI: '', COFFER_REQUIRE: '', COFFER_REQUIRE_PG: '', COFFER_REQUIRE_CEPH: '' };

/** This process's environment without what vitest set for its own workers. */
const outerEnv = () => Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')));

/** Runs vitest on test/fixtures/skip-policy (two tests needing zsh and fish, both missing): what each test became. */
async function shellTests(env: Record<string, string>): Promise<{ code: number | null; tests: Record<string, string> }> {
  const report = path.join(tempDir('coffer-report-'), 'report.json');
  const child = spawn(
    process.execPath,
    [
      'node_modules/vitest/vitest.mjs',
      'run',
      '--config',
      'test/fixtures/skip-policy/vitest.config.ts',
      '--reporter=json',
      `--outputFile=${report}`,
    ],
    { env: { ...outerEnv(), ...NOTHING_REQUIRED, ...env }, stdio: 'ignore' },
  );
  endsWithTest(child);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const results = JSON.parse(fs.readFileSync(report, 'utf8')) as {
    testResults: { assertionResults: { title: string; status: string }[] }[];
  };
  const tests = Object.fromEntries(
    results.testResults.flatMap((file) => file.assertionResults).map(({ title, status }) => [title.split(':')[0]!, status]),
  );
  return { code, tests };
}

describe('a test whose tool is missing', () => {
  it('is skipped where the run requires other things (COFFER_REQUIRE_PG=1), and fails where it requires that tool', async () => {
    expect(await shellTests({})).toEqual({ code: 0, tests: { zsh: 'skipped', fish: 'skipped' } });
    expect(await shellTests({ COFFER_REQUIRE_PG: '1', CI: 'false' })).toEqual({ code: 0, tests: { zsh: 'skipped', fish: 'skipped' } });
    expect(await shellTests({ COFFER_REQUIRE: 'postgres,zsh' })).toEqual({ code: 1, tests: { zsh: 'failed', fish: 'skipped' } });
    expect(await shellTests({ CI: 'true' })).toEqual({ code: 1, tests: { zsh: 'failed', fish: 'failed' } });
  });
});
