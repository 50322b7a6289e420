/**
 * The server API versions this SDK speaks. The server names its version in its API description (`info.version`
 * of /openapi.json, SPEC: 0.1.0). A 0.x version is compatible within its minor version (0.1.0, 0.1.7), a later one
 * within its major version (semver).
 */
import { IncompatibleServerError } from '../errors.js';

/** The API versions this SDK speaks, as the version lines it accepts ("0.1" accepts 0.1.0, 0.1.1, …). */
export const SUPPORTED_API_VERSIONS: readonly string[] = ['0.1'];

/** Whether a server's API version is one of SUPPORTED_API_VERSIONS. */
export function speaksApiVersion(version: string): boolean {
  const match = /^(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(version);
  if (!match) return false;
  const line = match[1] === '0' ? `0.${match[2]}` : match[1]!;
  return SUPPORTED_API_VERSIONS.includes(line);
}

/** The server's version when this SDK speaks it, else IncompatibleServerError naming both. */
export function requireSpokenVersion(version: string | undefined, url: string): string {
  if (version === undefined || !speaksApiVersion(version)) {
    throw new IncompatibleServerError(
      SUPPORTED_API_VERSIONS.map((line) => `${line}.x`),
      version,
      url,
    );
  }
  return version;
}
