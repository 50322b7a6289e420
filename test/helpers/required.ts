/**
 * One skip policy for every test that needs something the machine may lack (a tool, root, a Node feature): such a
 * test is skipped where that is missing (vitest reports it as skipped), unless the run requires it: then the test
 * runs and fails, so nothing CI installs is silently left out. Each requirement is its own:
 *
 * - COFFER_REQUIRE: the requirements of this run, separated by commas or spaces (names below), or `all` for every
 *   one of REQUIREMENTS. .ci/run names what it installs.
 * - CI=true (or 1): `all`, unless COFFER_REQUIRE names the requirements itself (a CI script that lists what it
 *   installed, as .ci/node24 does for a pass without Podman, is not overruled by the CI variable its runner sets).
 *   CI=false, 0 or empty is not CI.
 * - COFFER_REQUIRE_PG=1 requires `postgres`, COFFER_REQUIRE_CEPH=1 `ceph` (older names; nothing else).
 *
 * A test asks with `lacking(available, 'name')`: in `describe.skipIf(...)`/`it.skipIf(...)`, never an early return.
 */
import { spawnSync } from 'node:child_process';

/**
 * What `all` requires. What depends on the Node version is required only by naming it: node:zlib's zstd (`node:zstd`,
 * Node 22.15 and later), a SQLite driver (`sqlite:node`, `sqlite:better-sqlite3`; docs/runtime.md).
 */
export const REQUIREMENTS = [
  'postgres',
  'ceph',
  'chromium',
  'nginx',
  'systemd-analyze',
  'prometheus',
  'tmux',
  'zsh',
  'fish',
  'gnu-tar',
  'setpriv',
  'python-libsodium',
  'zstd',
  'root',
  'podman',
] as const;

export type Requirement = (typeof REQUIREMENTS)[number] | 'node:zstd' | `sqlite:${string}`;

const isOn = (value: string | undefined): boolean => value !== undefined && !['', '0', 'false'].includes(value.toLowerCase());

/** The requirements an environment sets (exported for its test). */
export function requirementsOf(env: NodeJS.ProcessEnv): Set<string> {
  const named = new Set((env.COFFER_REQUIRE ?? '').split(/[\s,]+/).filter(Boolean));
  const ciRequiresAll = isOn(env.CI) && named.size === 0;
  if (named.delete('all') || ciRequiresAll) for (const name of REQUIREMENTS) named.add(name);
  if (env.COFFER_REQUIRE_PG === '1') named.add('postgres');
  if (env.COFFER_REQUIRE_CEPH === '1') named.add('ceph');
  return named;
}

const requirements = requirementsOf(process.env);

/** Whether this run requires `what` (a test that needs it fails rather than skips without it). */
export const required = (what: Requirement): boolean => requirements.has(what);

/**
 * Whether any requirement is set. Kept for `lacking(available)` without a name, which earlier tests call: name the
 * requirement instead, so that requiring one thing does not require every other.
 */
export const REQUIRED = requirements.size > 0;

const warned = new Set<string>();

/**
 * Whether a test that needs `what` (`available` says if it is here) is skipped: when it is missing and this run does
 * not require it. Says so once per file on stderr.
 */
export function lacking(available: boolean, what?: Requirement): boolean {
  const skip = !available && !(what === undefined ? REQUIRED : required(what));
  if (skip && !warned.has(what ?? '')) {
    warned.add(what ?? '');
    const name = what ?? 'a tool';
    console.warn(`${name} is missing here: skipping the tests that need it (COFFER_REQUIRE=${name} makes them fail instead)`);
  }
  return skip;
}

/** Whether `command` runs (`command --version` exits 0). */
export const installed = (command: string, args = ['--version']): boolean => spawnSync(command, args).status === 0;

/** Whether this process runs as root (the tmpfs mount, a file owned by another user, setpriv). */
export const isRoot = process.getuid?.() === 0;

/** Debian's `prometheus` package (promtool and the server): deploy/prometheus and deploy/grafana are tested with it. */
export const PROMTOOL = '/usr/bin/promtool';
export const PROMETHEUS = '/usr/bin/prometheus';
