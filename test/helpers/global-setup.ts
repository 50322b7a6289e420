/**
 * The test run's own temp root (vitest `globalSetup`). Before the test workers start, TMPDIR points at a fresh
 * `coffer-test-run-XXXXXX` directory, so whatever the run puts in "the temp folder" (tempDir(), servers, CLI
 * processes, s3rver, Chromium) lands there. At the end the root is removed, and if anything was still in it,
 * the run fails naming it: a test that leaves files behind is a bug to fix, not to hide. (Keep the name short:
 * Chromium puts a Unix socket in there, and socket paths are limited to about 100 bytes.)
 *
 * HOME and the XDG base directories (config, state, cache, data) point at a fresh `home` folder in that root, so
 * no test, and no process a test starts, reads or writes the developer's own: their `~/.config/coffer` profiles,
 * `~/.local/state/coffer` chains. (test/helpers/setup.ts gives each test file a home of its own on top.)
 *
 * It also starts the run's throwaway Ceph cluster (test/helpers/ceph.ts) in the background, unless
 * COFFER_TEST_CEPH=off: the workers find it through COFFER_TEST_CEPH_STATE, a file that holds either the
 * gateway's endpoint or why it could not start (test/helpers/s3.ts waits for it). The cluster is stopped at
 * the end of the run, and also if the run is interrupted or this process dies (ceph.ts's watchdog).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type CephCluster, cephMissing, startCeph } from './ceph.js';

/** The variables that locate a user's files. */
export const HOME_VARIABLES = ['HOME', 'XDG_CONFIG_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_DATA_HOME'] as const;

const RUN_HOME = 'home';
/** The run's process id, in its root: a root whose process is gone belongs to a run that was killed. */
const RUN_PID = '.pid';

/**
 * A run killed by a signal never reaches its teardown, so its root stays behind: the next run removes the roots
 * whose process no longer exists (roots of runs still going, and of older runs without the file, are left alone).
 */
function removeRootsOfDeadRuns(): void {
  const parent = os.tmpdir();
  for (const name of fs.readdirSync(parent)) {
    if (!name.startsWith('coffer-test-run-')) continue;
    let pid: number;
    try {
      pid = Number(fs.readFileSync(path.join(parent, name, RUN_PID), 'utf8'));
    } catch {
      continue;
    }
    try {
      process.kill(pid, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') fs.rmSync(path.join(parent, name), { recursive: true, force: true });
    }
  }
}

/** Makes `dir` a home with its XDG base directories inside it; the variables that point there. */
export function isolatedHome(dir: string): Record<(typeof HOME_VARIABLES)[number], string> {
  const env = {
    HOME: dir,
    XDG_CONFIG_HOME: path.join(dir, '.config'),
    XDG_STATE_HOME: path.join(dir, '.local/state'),
    XDG_CACHE_HOME: path.join(dir, '.cache'),
    XDG_DATA_HOME: path.join(dir, '.local/share'),
  };
  for (const folder of Object.values(env)) fs.mkdirSync(folder, { recursive: true });
  return env;
}

export default function setup(): () => void {
  const outer = process.env.TMPDIR;
  removeRootsOfDeadRuns();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-test-run-'));
  // Traversable like the system temp folder: a test runs the CLI as an unprivileged user on files in here.
  fs.chmodSync(root, 0o755);
  fs.writeFileSync(path.join(root, RUN_PID), String(process.pid));
  process.env.TMPDIR = root;
  const saved = Object.fromEntries(HOME_VARIABLES.map((name) => [name, process.env[name]]));
  Object.assign(process.env, isolatedHome(path.join(root, RUN_HOME)));
  // Tools the tests run (tsc, eslint, Redocly) turn on Node's module compile cache (22.1+), which would otherwise
  // leave a node-compile-cache folder in the temp root: a cache, not test output, so none is kept.
  const compileCache = process.env.NODE_DISABLE_COMPILE_CACHE;
  process.env.NODE_DISABLE_COMPILE_CACHE = '1';
  const ceph = startRunCeph(root);
  return async () => {
    await ceph.stop();
    if (compileCache === undefined) delete process.env.NODE_DISABLE_COMPILE_CACHE;
    else process.env.NODE_DISABLE_COMPILE_CACHE = compileCache;
    delete process.env.COFFER_TEST_CEPH_STATE;
    if (outer === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = outer;
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    // The run's home is the run's own (what the CLI keeps there is not a leak); everything else must be gone.
    const left = fs.readdirSync(root).filter((name) => name !== RUN_HOME && name !== RUN_PID);
    fs.rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    if (left.length > 0) {
      // Not thrown: vitest would then skip the rest of its shutdown (and leave its own temp files).
      console.error(`\nThe tests left ${left.length} temp entr${left.length === 1 ? 'y' : 'ies'} behind (now removed): ${left.join(', ')}`);
      console.error('Every test removes what it creates: see test/helpers/README.md.\n');
      process.exitCode = 1;
    }
  };
}

/** Starts Ceph without waiting for it; the state file says "starting", then the endpoint or the failure. */
function startRunCeph(root: string): { stop(): Promise<void> } {
  const stateFile = path.join(root, '.ceph-state.json');
  process.env.COFFER_TEST_CEPH_STATE = stateFile;
  const write = (state: object) => {
    fs.writeFileSync(`${stateFile}.tmp`, JSON.stringify(state));
    fs.renameSync(`${stateFile}.tmp`, stateFile);
  };
  const off = process.env.COFFER_TEST_CEPH === 'off';
  const missing = off ? 'COFFER_TEST_CEPH=off' : cephMissing();
  if (missing) {
    write({ error: missing });
    return { stop: async () => fs.rmSync(stateFile, { force: true }) };
  }
  write({ starting: true });
  let cluster: CephCluster | undefined;
  // Also when vitest exits without its teardown (Ctrl-C).
  const onExit = () => {
    cluster?.stop();
    fs.rmSync(stateFile, { force: true });
  };
  process.once('exit', onExit);
  // Once more on failure: the free ports it picked may have been taken by another run in between.
  const started = startCeph({ parent: root })
    .catch(() => startCeph({ parent: root }))
    .then(
      (c) => {
        cluster = c;
        write({ endpoint: c.endpoint, accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey });
      },
      (error: Error) => write({ error: `Ceph did not start: ${error.message}` }),
    );
  return {
    async stop() {
      await started;
      cluster?.stop();
      process.off('exit', onExit);
      fs.rmSync(stateFile, { force: true });
    },
  };
}
