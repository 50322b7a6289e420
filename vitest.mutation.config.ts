/**
 * The tests Stryker runs against each mutant (`npm run test:mutation`, stryker.config.mjs): the fast, pure tests of
 * the rules that guard users. The whole suite is not run per mutant: it starts servers and takes minutes.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'test/domain/*.test.ts',
      'test/rules/*.test.ts',
      'test/client/extract-policy.test.ts',
      'test/store/cached-store.test.ts',
      'test/store/cache-invalidation.test.ts',
    ],
    testTimeout: 30_000,
    pool: 'forks',
    setupFiles: ['test/helpers/setup.ts'],
  },
});
