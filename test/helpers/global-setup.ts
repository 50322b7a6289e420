/**
 * The test run's own temp root (vitest `globalSetup`). Before the test workers start, TMPDIR points at a fresh
 * `coffer-test-run-XXXXXX` directory, so whatever the run puts in "the temp folder" (tempDir(), servers, CLI
 * processes, s3rver, Chromium) lands there. At the end the root is removed, and if anything was still in it,
 * the run fails naming it: a test that leaves files behind is a bug to fix, not to hide. (Keep the name short:
 * Chromium puts a Unix socket in there, and socket paths are limited to about 100 bytes.)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export default function setup(): () => void {
  const outer = process.env.TMPDIR;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-test-run-'));
  // Traversable like the system temp folder: a test runs the CLI as an unprivileged user on files in here.
  fs.chmodSync(root, 0o755);
  process.env.TMPDIR = root;
  // Tools the tests run (tsc, eslint, Redocly) turn on Node's module compile cache (22.1+), which would otherwise
  // leave a node-compile-cache folder in the temp root: a cache, not test output, so none is kept.
  const compileCache = process.env.NODE_DISABLE_COMPILE_CACHE;
  process.env.NODE_DISABLE_COMPILE_CACHE = '1';
  return () => {
    if (compileCache === undefined) delete process.env.NODE_DISABLE_COMPILE_CACHE;
    else process.env.NODE_DISABLE_COMPILE_CACHE = compileCache;
    if (outer === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = outer;
    const left = fs.readdirSync(root);
    fs.rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    if (left.length > 0) {
      // Not thrown: vitest would then skip the rest of its shutdown (and leave its own temp files).
      console.error(`\nThe tests left ${left.length} temp entr${left.length === 1 ? 'y' : 'ies'} behind (now removed): ${left.join(', ')}`);
      console.error('Every test removes what it creates: see test/helpers/README.md.\n');
      process.exitCode = 1;
    }
  };
}
