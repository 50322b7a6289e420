/**
 * A bound in a test is a hang guard, not a speed requirement: it ends a test that would otherwise wait forever. Write
 * it as `hangGuard(ms)`, `ms` being generous for an idle machine; the factor (COFFER_TEST_HANG_FACTOR, default 5)
 * makes it hold on a loaded one too (at load 7-30 on two cores, test files took 5 to 14 times as long as idle).
 * vitest's default test and hook timeouts (vitest.config.ts) are scaled the same way. What a bound stops is cleaned up: a CLI a test
 * started is killed when the test ends (children.ts), a node that does not start is killed at once (serve-node.ts).
 */
const factor = Number(process.env.COFFER_TEST_HANG_FACTOR ?? '5');

export const HANG_FACTOR = Number.isFinite(factor) && factor >= 1 ? factor : 5;

/** `ms` (enough on an idle machine) scaled for a loaded one. */
export const hangGuard = (ms: number): number => Math.round(ms * HANG_FACTOR);
