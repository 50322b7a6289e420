/**
 * Temporary directories for tests. Use `tempDir()` instead of `fs.mkdtempSync(os.tmpdir())`: every directory it
 * makes is removed when its test file ends (test/helpers/setup.ts), after the file's own afterAll hooks have
 * stopped the servers and processes that use it, also when a test fails. See test/helpers/README.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const created = new Set<string>();

/** A new empty directory `<parent>/<prefix>XXXXXX`, removed at the end of the test file. */
export function tempDir(prefix = 'coffer-test-', parent = os.tmpdir()): string {
  const dir = fs.mkdtempSync(path.join(parent, prefix));
  created.add(dir);
  return dir;
}

/** Removes every directory tempDir() made in this test file (setup.ts runs it after the file's last hook). */
export function removeTempDirs(): void {
  for (const dir of created) fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  created.clear();
}
