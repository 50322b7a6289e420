import os from 'node:os';
import { defineConfig } from 'vitest/config';
import { hangGuard } from './test/helpers/bounds.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Hang guards, not speed requirements: scaled for a loaded machine (test/helpers/bounds.ts).
    testTimeout: hangGuard(30_000),
    hookTimeout: hangGuard(30_000),
    pool: 'forks',
    // Most test time is spent waiting on servers, child processes and databases, not computing: two files at once
    // even on two cores (vitest's default would be one there); the suite takes about 5½ instead of 8 minutes.
    maxWorkers: Math.max(2, os.availableParallelism() - 1),
    minWorkers: 1,
    // Temp directories: see test/helpers/README.md.
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/setup.ts'],
  },
});
