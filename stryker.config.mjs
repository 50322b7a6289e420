// Mutation testing of the rules that guard users: test/mutation/targets.mjs names what is mutated (by module or by
// declaration, so it cannot drift) and each target's break threshold; test/helpers/README.md ("Mutation testing")
// has the scores and the commit they were measured on. CI (.ci/run) runs `npm run test:mutation:ci`: incremental
// against the committed test/mutation/stryker-incremental.json, then the per-target thresholds.
import { mutatePatterns } from './test/mutation/targets.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  coverageAnalysis: 'perTest',
  mutate: mutatePatterns(),
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  incrementalFile: 'test/mutation/stryker-incremental.json',
  tempDirName: '.stryker-tmp',
  concurrency: 2,
  timeoutMS: 20_000,
  // The per-target floors are checked by test/mutation/check-scores.mjs; this is the whole run's.
  thresholds: { high: 90, low: 80, break: 90 },
};
