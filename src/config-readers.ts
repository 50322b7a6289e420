/**
 * How a setting's text becomes a value (src/config.ts reads every setting through these): durations, integers,
 * choices, URLs, secrets with their *_FILE variant, trusted proxies; a value set but invalid is a ConfigError.
 */
import fs from 'node:fs';
import net from 'node:net';
import type { PlanQuotas } from './domain/quotas.js';

import { SERVER_SETTINGS, type Setting } from './config-settings.js';

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`);
  }
}

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `<n>ms|s|m|h|d`, e.g. `2s`, `5m`, `30d`. Returns null when the text is not a duration. */
export function parseDuration(text: string): number | null {
  const match = DURATION.exec(text.trim());
  if (!match) return null;
  const value = Number(match[1]) * UNIT_MS[match[2]!]!;
  return Number.isSafeInteger(value) ? value : null;
}

export type Env = Record<string, string | undefined>;

/** What a reader returns: never null when the setting has a default. */
type Value<S extends Setting, T> = S['default'] extends string ? T : T | null;

export function read(env: Env, setting: Setting): string | null {
  const value = env[setting.name];
  return value === undefined || value.trim() === '' ? setting.default : value.trim();
}

export function text<S extends Setting>(env: Env, setting: S): Value<S, string> {
  return read(env, setting) as Value<S, string>;
}

/** Exactly as set, spaces included (a passphrase); null when unset or empty. */
export function exact(env: Env, setting: Setting): string | null {
  return env[setting.name] || setting.default;
}

const FILE_ERRORS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  ELOOP: 'too many symbolic links',
};

/**
 * A secret setting that may instead come from the file named by its _FILE twin (container and systemd secrets,
 * docs/operations.md#secrets-from-files): the file's text without one trailing newline. Setting both is an error;
 * so is a file that cannot be read or is empty. No message ever includes the secret itself.
 */
export function secret(env: Env, setting: Setting, fileSetting: Setting): string | null {
  const direct = read(env, setting);
  const file = read(env, fileSetting);
  if (file === null) return direct;
  if (direct !== null) {
    throw new ConfigError(fileSetting.name, `set either ${setting.name} or ${fileSetting.name}, not both`);
  }
  let content: string;
  try {
    content = fs.readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    throw new ConfigError(fileSetting.name, `cannot read the file "${file}": ${FILE_ERRORS[code] ?? (code || 'unreadable')}`);
  }
  const value = content.replace(/\r?\n$/, '');
  if (value === '') throw new ConfigError(fileSetting.name, `the file "${file}" is empty`);
  return value;
}

/** The variable a secret came from, for its error messages: the _FILE setting when the file gave it, else the setting itself. */
export function fromFile(env: Env, setting: Setting, fileSetting: Setting): string {
  return read(env, fileSetting) === null ? setting.name : fileSetting.name;
}

/** A duration setting without a default: null when unset. */
export function optionalDuration(env: Env, setting: Setting, minMs = 1): number | null {
  const value = read(env, setting);
  if (value === null) return null;
  const ms = parseDuration(value);
  if (ms === null || ms < minMs) throw new ConfigError(setting.name, `expected a duration like 30s, 5m or 6h, got "${value}"`);
  return ms;
}

export function duration(env: Env, setting: Setting & { default: string }, minMs = 1): number {
  const value = read(env, setting)!;
  const ms = parseDuration(value);
  if (ms === null || ms < minMs) throw new ConfigError(setting.name, `expected a duration like 2s, 5m or 1h, got "${value}"`);
  return ms;
}

/** COFFER_ORPHAN_GRACE: any duration (0 too); unset, at least an hour and at least the upload window. */
export function orphanGrace(env: Env, uploadWindowMs: number): number {
  const value = read(env, SERVER_SETTINGS.COFFER_ORPHAN_GRACE);
  if (value === null) return Math.max(3_600_000, uploadWindowMs);
  const ms = parseDuration(value);
  if (ms === null)
    throw new ConfigError(SERVER_SETTINGS.COFFER_ORPHAN_GRACE.name, `expected a duration like 30s, 5m or 1h, got "${value}"`);
  return ms;
}

export function integer<S extends Setting>(env: Env, setting: S, min: number, max: number): Value<S, number> {
  const value = read(env, setting);
  if (value === null) return null as Value<S, number>;
  if (!/^\d+$/.test(value)) throw new ConfigError(setting.name, `expected a whole number, got "${value}"`);
  const n = Number(value);
  if (n < min || n > max) throw new ConfigError(setting.name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** COFFER_QUOTA_<PLAN>: the plans whose quota is set. */
export function planQuotas(env: Env): PlanQuotas {
  const quotas: Partial<Record<'free' | 'plus' | 'pro', number>> = {};
  for (const [plan, setting] of [
    ['free', SERVER_SETTINGS.COFFER_QUOTA_FREE],
    ['plus', SERVER_SETTINGS.COFFER_QUOTA_PLUS],
    ['pro', SERVER_SETTINGS.COFFER_QUOTA_PRO],
  ] as const) {
    const bytes = integer(env, setting, 0, Number.MAX_SAFE_INTEGER);
    if (bytes !== null) quotas[plan] = bytes;
  }
  return quotas;
}

export function oneOf<V extends string, D extends V | null>(env: Env, setting: Setting & { default: D; values: readonly V[] }): V | D {
  const value = read(env, setting);
  if (value === null) return null as D;
  if (!(setting.values as readonly string[]).includes(value)) {
    throw new ConfigError(setting.name, `must be one of ${setting.values.join(', ')}, got "${value}"`);
  }
  return value as V;
}

/** An http(s) URL without trailing slashes. */
export function url<S extends Setting>(env: Env, setting: S): Value<S, string> {
  const value = read(env, setting);
  if (value === null) return null as Value<S, string>;
  try {
    const parsed = new URL(value);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('scheme');
  } catch {
    throw new ConfigError(setting.name, `expected an http(s) URL, got "${value}"`);
  }
  return value.replace(/\/+$/, '');
}

/**
 * A postgres:// URL that the driver can parse (pg-connection-string: the WHATWG URL parser, retried with a host for
 * `user@/db`, the local socket). The URL is never echoed: it may hold the password.
 */
export function checkDatabaseUrl(value: string, variable: string): void {
  if (!/^postgres(ql)?:\/\//.test(value)) throw new ConfigError(variable, 'expected a postgres:// URL');
  if (URL.canParse(value) || URL.canParse(value.replace('@/', '@localhost/'))) return;
  throw new ConfigError(
    variable,
    'not a valid postgres:// URL (percent-encode the characters # / ? @ : of a user name or password; a port is a number up to 65535)',
  );
}

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/** A comma-separated list of addresses, CIDR ranges and proxy-addr's range names; [] when unset. */
export function trustedProxies(env: Env, setting: Setting): string[] {
  const list = read(env, setting);
  if (list === null) return [];
  return list.split(',').map((entry) => {
    const item = entry.trim();
    if (PROXY_NAMES.includes(item)) return item;
    const [address = '', prefix, ...rest] = item.split('/');
    const family = net.isIP(address);
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32));
    if (family === 0 || !prefixOk || rest.length > 0) {
      throw new ConfigError(
        setting.name,
        `expected a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) or ${PROXY_NAMES.join('/')}, got "${item}"`,
      );
    }
    return item;
  });
}
