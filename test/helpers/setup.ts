/**
 * Runs in every test file before its own code (vitest `setupFiles`). Its afterAll is registered first, so it
 * runs last, once the file's own afterAll hooks have stopped the servers and processes using the file's temp
 * directories: then any `coffer serve` node the file started and did not stop (its start failed, or a sibling's
 * did) is killed, and the directories go. (A file whose tests are all skipped runs no hooks: create directories in
 * beforeAll or in a test, not while the file is collected.)
 */
import { afterAll, beforeAll } from 'vitest';
import { stopHookChildren } from './children.js';
import { HOME_VARIABLES, isolatedHome } from './global-setup.js';
import { stopServeNodes } from './serve-node.js';
import { removeTempDirs, tempDir } from './tmp.js';

// A home of the file's own (HOME, XDG_*), inherited by every process it starts: what one file's CLI runs keep
// there (profiles, chains) is not seen by another's. The run's home (global-setup.ts) stays for code that runs
// while the file is collected.
const saved = Object.fromEntries(HOME_VARIABLES.map((name) => [name, process.env[name]]));
beforeAll(() => {
  Object.assign(process.env, isolatedHome(tempDir('coffer-home-')));
});

afterAll(async () => {
  await stopServeNodes();
  await stopHookChildren();
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  removeTempDirs();
});
