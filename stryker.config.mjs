// Mutation testing of the rules that guard users (npm run test:mutation; not part of `npm test` or CI):
// test/helpers/README.md ("Mutation testing") says what is mutated, why, and the last scores.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  coverageAnalysis: 'perTest',
  mutate: [
    'src/domain/append-only.ts',
    'src/domain/grants.ts',
    'src/client/kit-core.ts',
    'src/store/cached-store.ts',
    'src/client/extract-policy.ts',
    'src/client/chain.ts:178-471',
    'src/client/envelope-recipient.ts:70-116',
  ],
  reporters: ['clear-text', 'progress', 'html'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  tempDirName: '.stryker-tmp',
  concurrency: 2,
  timeoutMS: 20_000,
  thresholds: { high: 90, low: 80, break: null },
};
