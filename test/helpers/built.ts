/**
 * Tests that run the built CLI or server (`npm test` builds first) fail clearly when the build is missing or
 * older than a source: the same check `npm start` uses to decide whether to build (scripts/build-stamp.mjs).
 */
import { staleBuild } from '../../scripts/build-stamp.mjs';

export function assertBuilt(): void {
  const stale = staleBuild();
  if (stale !== null) throw new Error(`${stale}: run \`npm run build\` (npm test does it)`);
}
