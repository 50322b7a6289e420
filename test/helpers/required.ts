/**
 * One skip policy for tests that need a tool the machine may lack (PostgreSQL, Chromium, nginx, systemd-analyze,
 * Ceph, tmux, zsh, fish, GNU tar, setpriv, Python with libsodium): on a developer's machine such a test is skipped
 * without it; in CI, which installs every one of them (.ci/run), it runs and fails instead, so nothing is silently
 * left out. CI is recognised by CI=true, or by COFFER_REQUIRE_PG=1 that .ci/run sets.
 */
export const REQUIRED = process.env.CI === 'true' || process.env.COFFER_REQUIRE_PG === '1';

/** Whether a test that needs something `available` reports is skipped here. */
export const lacking = (available: boolean): boolean => !available && !REQUIRED;

/** Debian's `prometheus` package (promtool and the server): deploy/prometheus and deploy/grafana are tested with it. */
export const PROMTOOL = '/usr/bin/promtool';
export const PROMETHEUS = '/usr/bin/prometheus';
