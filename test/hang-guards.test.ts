/**
 * A test's bound is a hang guard (test/helpers/bounds.ts); when one is hit, what the test started is stopped: a test
 * file run by vitest whose test times out while its process runs leaves no process behind.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { endsWithTest } from './helpers/children.js';
import { tempDir } from './helpers/tmp.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

it('a process started by a test or a hook that hits its bound is killed when the test (or the file) ends', async () => {
  const pidFile = path.join(tempDir('coffer-hang-'), 'pid');
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')));
  const child = spawn(
    process.execPath,
    ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/fixtures/hang-guard/vitest.config.ts'],
    { env: { ...env, PID_FILE: pidFile }, stdio: 'ignore' },
  );
  endsWithTest(child);
  expect(await new Promise((resolve) => child.on('exit', resolve))).toBe(1); // the fixture timed out
  const pids = [pidFile, `${pidFile}.hook`].map((file) => Number(fs.readFileSync(file, 'utf8')));
  const stillRunning = pids.filter(alive);
  for (const pid of stillRunning) process.kill(pid, 'SIGKILL');
  expect(stillRunning).toEqual([]);
});
