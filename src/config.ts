import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_KDF_PROFILE, KDF_PROFILE_NAMES, type KdfProfile } from './domain/kdf.js';
import { API_KEY_PATTERN } from './domain/keys.js';
import { PLANS, type Plan } from './domain/plans.js';
import type { PlanQuotas } from './domain/quotas.js';

/**
 * The only place that reads `process.env` (README.md#configuration): the server's settings (loadConfig → Config)
 * and the client commands' (loadClientConfig → ClientConfig). Everything else receives one of them; a Config is
 * complete from the start (the public URL included) and never changed afterwards.
 */
export type Config = Readonly<ConfigFields>;

interface ConfigFields {
  port: number;
  host: string;
  publicUrl: string;
  /** COFFER_PUBLIC_URL is set (false: publicUrl is only derived from PORT, as `coffer admin` in a bare shell has it). */
  publicUrlGiven: boolean;
  dataDir: string;
  databaseUrl: string | null;
  /** COFFER_SQLITE_DRIVER: the embedded database's driver; null: the best this Node has (docs/runtime.md). */
  sqliteDriver: 'node' | 'better-sqlite3' | null;
  blobStore: 'fs' | 's3';
  /**
   * COFFER_ACCEL_REDIRECT: the prefix of nginx's `internal` location that serves `COFFER_DATA_DIR/blobs/`; set,
   * downloads that come through a COFFER_TRUST_PROXY proxy are answered with `X-Accel-Redirect: <prefix>/<blob key>`
   * and nginx sends the bytes (docs/deploy.md#downloads-served-by-nginx); Coffer streams any other itself. Null:
   * Coffer streams them all.
   */
  accelRedirect: string | null;
  s3: {
    endpoint: string | null;
    bucket: string | null;
    region: string;
    accessKeyId: string | null;
    secretAccessKey: string | null;
  };
  uploadProtocol: 'direct' | 'blobhost-client';
  maxArchiveBytes: number;
  /** COFFER_QUOTA_FREE/PLUS/PRO: each plan's storage quota in bytes (absent: none; docs/api-rules.md#quota). */
  planQuotas: PlanQuotas;
  uploadWindowMs: number;
  /** Minimum age of an orphan blob or incomplete upload before the sweeper removes it (COFFER_ORPHAN_GRACE). */
  orphanGraceMs: number;
  sseIntervalMs: number;
  sseTimeoutMs: number;
  /**
   * Event streams open at once per account and per client address; one more is refused in-stream
   * (docs/api-rules.md#events).
   */
  sseMaxStreams: { perAccount: number; perAddress: number };
  /**
   * COFFER_TRUST_PROXY: the reverse proxies whose `X-Forwarded-*` headers are believed (addresses, CIDR ranges,
   * or `loopback`/`linklocal`/`uniquelocal`); the client address is then the nearest forwarded address not in
   * this list. Empty: the headers are ignored and the client address is the connection's (docs/deploy.md).
   */
  trustProxy: readonly string[];
  /** The bearer token `/metrics` requires; null: `/metrics` is not served (docs/operations.md#metrics). */
  metricsToken: string | null;
  /**
   * The in-process cache of metadata reads (src/store/cached-store.ts; docs/operations.md#metadata-cache):
   * COFFER_METADATA_CACHE_MB bounds it (0: off); with PostgreSQL an entry is read again after `ttlMs`
   * (COFFER_METADATA_CACHE_TTL) at the latest, a backstop for a change notification lost without the connection
   * failing.
   */
  metadataCache: { maxBytes: number; ttlMs: number };
  /** How often the background sweeper runs; not an operator setting, fixed unless a test overrides it. */
  sweepIntervalMs: number;
  /** Protection against slow or idle clients (fixed defaults but the connection cap; tests shorten them). */
  limits: ConnectionLimits;
  /** Console sign-in attempts (API key or login link) allowed per client address and window. */
  signInLimit: { maxAttempts: number; windowMs: number };
  /** blobhost-client: multipart uploads one backup slot may have open at once (fixed; tests may change it). */
  maxMultipartUploadsPerSlot: number;
  logLevel: LogLevel;
  initialApiKey: string | null;
  /** COFFER_INITIAL_PLAN: the plan of the account the first start creates on an empty database. */
  initialPlan: Plan;
}

export interface ConnectionLimits {
  /** Time allowed to send the request headers. */
  headersTimeoutMs: number;
  /** Time allowed for a whole request, body included (a 50 MiB upload at 32 KiB/s fits). */
  requestTimeoutMs: number;
  /** Idle keep-alive connections are closed after this long. */
  keepAliveTimeoutMs: number;
  /** An upload slower than `minUploadBytesPerSecond` over `uploadRateWindowMs` is cut off. */
  minUploadBytesPerSecond: number;
  uploadRateWindowMs: number;
  /** Open connections at most (10,000 event streams must fit); COFFER_MAX_CONNECTIONS. */
  maxConnections: number;
}

export const DEFAULT_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 30 * 60_000,
  keepAliveTimeoutMs: 30_000,
  minUploadBytesPerSecond: 4096,
  uploadRateWindowMs: 60_000,
  maxConnections: 20_000,
};

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

type Env = Record<string, string | undefined>;

/**
 * One environment variable: its default as the text one would set (null: unset; the loaders parse it like a set
 * value, so the default shown is the default used), one line on what it does, and for a choice its values.
 */
export interface Setting {
  readonly name: string;
  readonly default: string | null;
  readonly about: string;
  readonly values?: readonly string[];
}

/** A table keyed by variable name; each entry also carries its name, so a reader needs only the entry. */
function settings<const T extends Record<string, Omit<Setting, 'name'>>>(
  table: T,
): { readonly [K in keyof T & string]: T[K] & { name: K } } {
  return Object.fromEntries(Object.entries(table).map(([name, entry]) => [name, { ...entry, name }])) as never;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Every setting of the server, the one list: loadConfig reads only these (its readers take an entry of this table,
 * not a name), and `coffer serve --help` prints it. To add a setting: one line here, then read it in loadConfig.
 */
export const SERVER_SETTINGS = settings({
  PORT: { default: '8080', about: 'TCP port to listen on (0: any free port)' },
  HOST: { default: '0.0.0.0', about: 'address to listen on' },
  COFFER_PUBLIC_URL: { default: null, about: 'URL clients and the console reach this server at (unset: http://localhost:<PORT>)' },
  COFFER_DATA_DIR: { default: './data', about: 'directory of the SQLite database and of the fs blob store' },
  COFFER_DATABASE_URL: { default: null, about: 'postgres:// URL of a PostgreSQL database (unset: SQLite in COFFER_DATA_DIR)' },
  COFFER_DATABASE_URL_FILE: { default: null, about: 'file holding COFFER_DATABASE_URL (a secret file; not with COFFER_DATABASE_URL)' },
  COFFER_SQLITE_DRIVER: {
    default: null,
    values: ['node', 'better-sqlite3'],
    about: 'SQLite driver (unset: node:sqlite where the runtime has it, else better-sqlite3; docs/runtime.md)',
  },
  COFFER_BLOB_STORE: { default: 'fs', values: ['fs', 's3'], about: 'where encrypted archives are stored' },
  COFFER_ACCEL_REDIRECT: {
    default: null,
    about:
      "behind nginx, fs store: nginx's internal location of COFFER_DATA_DIR/blobs, e.g. /_coffer_blobs; downloads through a COFFER_TRUST_PROXY proxy then use X-Accel-Redirect (unset: off)",
  },
  COFFER_S3_ENDPOINT: { default: null, about: 'S3-compatible endpoint, path-style (unset: AWS S3)' },
  COFFER_S3_BUCKET: { default: null, about: 'bucket of the archives (required with COFFER_BLOB_STORE=s3)' },
  COFFER_S3_REGION: { default: 'us-east-1', about: 'S3 region' },
  COFFER_S3_ACCESS_KEY_ID: { default: null, about: 'S3 access key id (unset, with the secret: the AWS default chain)' },
  COFFER_S3_SECRET_ACCESS_KEY: { default: null, about: 'S3 secret access key' },
  COFFER_S3_SECRET_ACCESS_KEY_FILE: {
    default: null,
    about: 'file holding COFFER_S3_SECRET_ACCESS_KEY (a secret file; not with COFFER_S3_SECRET_ACCESS_KEY)',
  },
  COFFER_UPLOAD_PROTOCOL: {
    default: 'direct',
    values: ['direct', 'blobhost-client'],
    about: 'how clients upload (docs/upload-protocols.md)',
  },
  COFFER_MAX_ARCHIVE_BYTES: { default: '52428800', about: 'largest encrypted archive accepted, in bytes' },
  COFFER_QUOTA_FREE: { default: null, about: 'storage quota of a free-plan account in bytes: its stored ciphertext at most (unset: none)' },
  COFFER_QUOTA_PLUS: { default: null, about: 'storage quota of a plus-plan account in bytes (unset: none)' },
  COFFER_QUOTA_PRO: { default: null, about: 'storage quota of a pro-plan account in bytes (unset: none)' },
  COFFER_UPLOAD_WINDOW: { default: '1h', about: 'how long an upload slot stays open' },
  COFFER_ORPHAN_GRACE: {
    default: null,
    about:
      'age before the sweeper removes an orphan blob or incomplete upload (unset: 1h or ' +
      'COFFER_UPLOAD_WINDOW, the longer; shorter only for tests)',
  },
  COFFER_SSE_INTERVAL: { default: '2s', about: "how often an event stream looks at its backup's status" },
  COFFER_SSE_TIMEOUT: { default: '5m', about: 'an event stream is closed after this long' },
  COFFER_SSE_MAX_PER_ACCOUNT: { default: '100', about: 'event streams open at once per account' },
  COFFER_SSE_MAX_PER_ADDRESS: { default: '500', about: 'event streams open at once per client address' },
  COFFER_METADATA_CACHE_MB: { default: '64', about: 'memory for cached API keys, accounts and backup lists, in MiB (0: no cache)' },
  COFFER_METADATA_CACHE_TTL: {
    default: '1s',
    about: 'PostgreSQL: a cached entry is read again after this long at the latest, a backstop for a lost change notification',
  },
  COFFER_MAX_CONNECTIONS: {
    default: String(DEFAULT_LIMITS.maxConnections),
    about: 'open connections at most per node; one more is closed at once (each takes a file descriptor: keep below `ulimit -n`)',
  },
  COFFER_METRICS_TOKEN: { default: null, about: 'bearer token /metrics requires, 16+ characters (unset: no /metrics)' },
  COFFER_METRICS_TOKEN_FILE: { default: null, about: 'file holding COFFER_METRICS_TOKEN (a secret file; not with COFFER_METRICS_TOKEN)' },
  COFFER_SIGNIN_ATTEMPTS: { default: '30', about: 'console sign-in attempts per client address and window' },
  COFFER_SIGNIN_WINDOW: { default: '10m', about: 'the window of COFFER_SIGNIN_ATTEMPTS' },
  COFFER_TRUST_PROXY: {
    default: null,
    about: 'reverse proxies whose X-Forwarded-For is believed: addresses, CIDRs, loopback (unset: none)',
  },
  LOG_LEVEL: { default: 'info', values: LOG_LEVELS, about: 'level of the JSON log lines on stdout' },
  COFFER_INITIAL_API_KEY: { default: null, about: 'API key of the first account on an empty database (unset: one is made and shown once)' },
  COFFER_INITIAL_PLAN: {
    default: 'pro',
    values: PLANS,
    about: 'plan of the first account on an empty database (pro: one backup per 30 minutes)',
  },
  COFFER_INITIAL_API_KEY_FILE: {
    default: null,
    about: 'file holding COFFER_INITIAL_API_KEY (a secret file; not with COFFER_INITIAL_API_KEY)',
  },
});

/** Every setting of the client commands (`coffer --help` prints it; docs/client.md#environment). */
export const CLIENT_SETTINGS = settings({
  COFFER_URL: { default: 'http://localhost:8080', about: 'the Coffer server' },
  COFFER_API_KEY: { default: null, about: 'API key (required by every command that talks to the server)' },
  COFFER_BLOB_API_URL: { default: null, about: 'blob host of a blobhost-client server (unset: <COFFER_URL>/blob)' },
  COFFER_PASSPHRASE: { default: null, about: 'the vault passphrase, exactly (else --passphrase-file, else a prompt)' },
  COFFER_NEW_PASSPHRASE: {
    default: null,
    about: 'the new passphrase of `coffer passphrase` and `coffer recover` (else --new-passphrase-file, else a prompt)',
  },
  COFFER_RECIPIENT: { default: null, about: 'recipient `coffer backup` seals to (`coffer recipient` prints it): no passphrase needed' },
  COFFER_KDF: {
    default: DEFAULT_KDF_PROFILE,
    values: KDF_PROFILE_NAMES,
    about: 'Argon2id cost of a new wrapping (init, passphrase, rekey, recover); min is for tests',
  },
  COFFER_MAX_ARCHIVE_BYTES: {
    default: null,
    about: "a lower ciphertext limit of this client's own: it only lowers the limit the server announces (unset: the server's)",
  },
  COFFER_PROFILE: {
    default: null,
    about: 'profile of the config file to use (--profile wins; unset: the file\'s "default" unless COFFER_URL or COFFER_API_KEY is set)',
  },
  COFFER_ACCEPT_OLDER_KEYS: {
    default: null,
    about: 'set to 1 to accept a vault or kit without the newest key this machine saw (a deliberate return to an older envelope)',
  },
  COFFER_REQUEST_TIMEOUT: {
    default: '2m',
    about: 'how long one API request may take, its answer read to the end; a stalled server or proxy fails the command',
  },
  COFFER_STALL_WINDOW: {
    default: '1m',
    about: 'an upload or download that moves less than 1 KiB/s over this much waiting on the network fails',
  },
  COFFER_RUN_TIMEOUT: {
    default: null,
    about:
      "the deadline of one `coffer run` (and each `coffer agent` run): a network failure after it (unset: the profile's runTimeoutMinutes, default 12h)",
  },
  XDG_CONFIG_HOME: { default: null, about: 'the profiles are in <dir>/coffer/config.json (unset: ~/.config)' },
  XDG_STATE_HOME: { default: null, about: "each profile's history chain and last run are in <dir>/coffer/ (unset: ~/.local/state)" },
});

/**
 * What a profile of the config file supplies (docs/client.md#profiles), as the variables it stands in for: a
 * variable that is set wins over the profile, the profile over the default (a flag wins over both).
 */
export type ProfileSettings = Partial<Record<'COFFER_URL' | 'COFFER_API_KEY' | 'COFFER_BLOB_API_URL' | 'COFFER_RECIPIENT', string>>;

/** What a reader returns: never null when the setting has a default. */
type Value<S extends Setting, T> = S['default'] extends string ? T : T | null;

function read(env: Env, setting: Setting): string | null {
  const value = env[setting.name];
  return value === undefined || value.trim() === '' ? setting.default : value.trim();
}

function text<S extends Setting>(env: Env, setting: S): Value<S, string> {
  return read(env, setting) as Value<S, string>;
}

/** Exactly as set, spaces included (a passphrase); null when unset or empty. */
function exact(env: Env, setting: Setting): string | null {
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
function secret(env: Env, setting: Setting, fileSetting: Setting): string | null {
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
function fromFile(env: Env, setting: Setting, fileSetting: Setting): string {
  return read(env, fileSetting) === null ? setting.name : fileSetting.name;
}

/** A duration setting without a default: null when unset. */
function optionalDuration(env: Env, setting: Setting, minMs = 1): number | null {
  const value = read(env, setting);
  if (value === null) return null;
  const ms = parseDuration(value);
  if (ms === null || ms < minMs) throw new ConfigError(setting.name, `expected a duration like 30s, 5m or 6h, got "${value}"`);
  return ms;
}

function duration(env: Env, setting: Setting & { default: string }, minMs = 1): number {
  const value = read(env, setting)!;
  const ms = parseDuration(value);
  if (ms === null || ms < minMs) throw new ConfigError(setting.name, `expected a duration like 2s, 5m or 1h, got "${value}"`);
  return ms;
}

/** COFFER_ORPHAN_GRACE: any duration (0 too); unset, at least an hour and at least the upload window. */
function orphanGrace(env: Env, uploadWindowMs: number): number {
  const value = read(env, SERVER_SETTINGS.COFFER_ORPHAN_GRACE);
  if (value === null) return Math.max(3_600_000, uploadWindowMs);
  const ms = parseDuration(value);
  if (ms === null)
    throw new ConfigError(SERVER_SETTINGS.COFFER_ORPHAN_GRACE.name, `expected a duration like 30s, 5m or 1h, got "${value}"`);
  return ms;
}

function integer<S extends Setting>(env: Env, setting: S, min: number, max: number): Value<S, number> {
  const value = read(env, setting);
  if (value === null) return null as Value<S, number>;
  if (!/^\d+$/.test(value)) throw new ConfigError(setting.name, `expected a whole number, got "${value}"`);
  const n = Number(value);
  if (n < min || n > max) throw new ConfigError(setting.name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** COFFER_QUOTA_<PLAN>: the plans whose quota is set. */
function planQuotas(env: Env): PlanQuotas {
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

function oneOf<V extends string, D extends V | null>(env: Env, setting: Setting & { default: D; values: readonly V[] }): V | D {
  const value = read(env, setting);
  if (value === null) return null as D;
  if (!(setting.values as readonly string[]).includes(value)) {
    throw new ConfigError(setting.name, `must be one of ${setting.values.join(', ')}, got "${value}"`);
  }
  return value as V;
}

/** An http(s) URL without trailing slashes. */
function url<S extends Setting>(env: Env, setting: S): Value<S, string> {
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
function checkDatabaseUrl(value: string, variable: string): void {
  if (!/^postgres(ql)?:\/\//.test(value)) throw new ConfigError(variable, 'expected a postgres:// URL');
  if (URL.canParse(value) || URL.canParse(value.replace('@/', '@localhost/'))) return;
  throw new ConfigError(
    variable,
    'not a valid postgres:// URL (percent-encode the characters # / ? @ : of a user name or password; a port is a number up to 65535)',
  );
}

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/** A comma-separated list of addresses, CIDR ranges and proxy-addr's range names; [] when unset. */
function trustedProxies(env: Env, setting: Setting): string[] {
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

export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  const S = SERVER_SETTINGS;
  const port = integer(env, S.PORT, 0, 65535);
  const databaseUrl = secret(env, S.COFFER_DATABASE_URL, S.COFFER_DATABASE_URL_FILE);
  if (databaseUrl !== null) checkDatabaseUrl(databaseUrl, fromFile(env, S.COFFER_DATABASE_URL, S.COFFER_DATABASE_URL_FILE));
  const blobStore = oneOf(env, S.COFFER_BLOB_STORE);
  const s3 = {
    endpoint: text(env, S.COFFER_S3_ENDPOINT),
    bucket: text(env, S.COFFER_S3_BUCKET),
    region: text(env, S.COFFER_S3_REGION),
    accessKeyId: text(env, S.COFFER_S3_ACCESS_KEY_ID),
    secretAccessKey: secret(env, S.COFFER_S3_SECRET_ACCESS_KEY, S.COFFER_S3_SECRET_ACCESS_KEY_FILE),
  };
  if (blobStore === 's3' && s3.bucket === null) {
    throw new ConfigError(S.COFFER_S3_BUCKET.name, 'is required when COFFER_BLOB_STORE=s3');
  }
  const accelRedirect = text(env, S.COFFER_ACCEL_REDIRECT);
  if (accelRedirect !== null) {
    if (!/^(\/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+$/.test(accelRedirect)) {
      throw new ConfigError(
        S.COFFER_ACCEL_REDIRECT.name,
        `expected a location path like /_coffer_blobs (no trailing slash), got "${accelRedirect}"`,
      );
    }
    if (blobStore !== 'fs') {
      throw new ConfigError(
        S.COFFER_ACCEL_REDIRECT.name,
        'works only with COFFER_BLOB_STORE=fs (nginx serves the files of COFFER_DATA_DIR/blobs)',
      );
    }
  }
  const initialApiKey = secret(env, S.COFFER_INITIAL_API_KEY, S.COFFER_INITIAL_API_KEY_FILE);
  if (initialApiKey !== null && !API_KEY_PATTERN.test(initialApiKey)) {
    throw new ConfigError(
      fromFile(env, S.COFFER_INITIAL_API_KEY, S.COFFER_INITIAL_API_KEY_FILE),
      'expected cfk_ followed by 43 base64url characters',
    );
  }
  const metricsToken = secret(env, S.COFFER_METRICS_TOKEN, S.COFFER_METRICS_TOKEN_FILE);
  if (metricsToken !== null && !/^[\x21-\x7e]{16,}$/.test(metricsToken)) {
    throw new ConfigError(
      fromFile(env, S.COFFER_METRICS_TOKEN, S.COFFER_METRICS_TOKEN_FILE),
      'expected at least 16 printable characters without spaces',
    );
  }
  return {
    port,
    host: text(env, S.HOST),
    publicUrl: url(env, S.COFFER_PUBLIC_URL) ?? `http://localhost:${port}`,
    publicUrlGiven: read(env, S.COFFER_PUBLIC_URL) !== null,
    dataDir: path.resolve(cwd, text(env, S.COFFER_DATA_DIR)),
    databaseUrl,
    sqliteDriver: oneOf(env, S.COFFER_SQLITE_DRIVER),
    blobStore,
    accelRedirect,
    s3,
    uploadProtocol: oneOf(env, S.COFFER_UPLOAD_PROTOCOL),
    maxArchiveBytes: integer(env, S.COFFER_MAX_ARCHIVE_BYTES, 1, Number.MAX_SAFE_INTEGER),
    planQuotas: planQuotas(env),
    uploadWindowMs: duration(env, S.COFFER_UPLOAD_WINDOW),
    orphanGraceMs: orphanGrace(env, duration(env, S.COFFER_UPLOAD_WINDOW)),
    sseIntervalMs: duration(env, S.COFFER_SSE_INTERVAL, 10),
    sseTimeoutMs: duration(env, S.COFFER_SSE_TIMEOUT),
    sseMaxStreams: {
      perAccount: integer(env, S.COFFER_SSE_MAX_PER_ACCOUNT, 1, 1_000_000),
      perAddress: integer(env, S.COFFER_SSE_MAX_PER_ADDRESS, 1, 1_000_000),
    },
    trustProxy: trustedProxies(env, S.COFFER_TRUST_PROXY),
    metricsToken,
    metadataCache: {
      maxBytes: integer(env, S.COFFER_METADATA_CACHE_MB, 0, 65_536) * 1024 * 1024,
      ttlMs: duration(env, S.COFFER_METADATA_CACHE_TTL, 10),
    },
    sweepIntervalMs: 60_000,
    limits: { ...DEFAULT_LIMITS, maxConnections: integer(env, S.COFFER_MAX_CONNECTIONS, 1, 10_000_000) },
    signInLimit: {
      maxAttempts: integer(env, S.COFFER_SIGNIN_ATTEMPTS, 1, 1_000_000),
      windowMs: duration(env, S.COFFER_SIGNIN_WINDOW, 1000),
    },
    maxMultipartUploadsPerSlot: 4,
    logLevel: oneOf(env, S.LOG_LEVEL),
    initialApiKey,
    initialPlan: oneOf(env, S.COFFER_INITIAL_PLAN),
  };
}

/**
 * The settings of the `coffer` client commands (docs/client.md). A value that is set but invalid throws a
 * ConfigError; whether a setting is needed is up to the command (the API key for every command that talks to the
 * server, a passphrase only when no file or prompt gives it).
 */
export interface ClientConfig {
  /** COFFER_URL: the server, without trailing slashes. */
  url: string;
  /** COFFER_API_KEY; null when unset. */
  apiKey: string | null;
  /** COFFER_BLOB_API_URL: the blob host of a blobhost-client server; null: `<url>/blob`. */
  blobApiUrl: string | null;
  /** COFFER_PASSPHRASE and COFFER_NEW_PASSPHRASE exactly as given (spaces count); null when unset or empty. */
  passphrase: string | null;
  newPassphrase: string | null;
  /** COFFER_KDF: the Argon2id profile of a new wrapping when `--kdf` names none. */
  kdf: KdfProfile;
  /** COFFER_MAX_ARCHIVE_BYTES: this client's own ciphertext limit, which only lowers the server's; null: none (the server's holds). */
  maxArchiveBytes: number | null;
  /** COFFER_RECIPIENT: `coffer backup` seals to this recipient (no passphrase); the command parses it. null when unset. */
  recipient: string | null;
  /** COFFER_PROFILE: the profile to use when `--profile` names none; null: the config file's default. */
  profileName: string | null;
  /** COFFER_ACCEPT_OLDER_KEYS=1: a vault or kit without the newest key seen is accepted (src/cli/key-pin.ts). */
  acceptOlderKeys: boolean;
  /** COFFER_REQUEST_TIMEOUT: one API request, its answer read to the end. */
  requestTimeoutMs: number;
  /** COFFER_STALL_WINDOW: the window of the stall rule of uploads and downloads (src/client/sdk.ts TransferWatch). */
  stallWindowMs: number;
  /** COFFER_RUN_TIMEOUT: the deadline of one agent run; null: the profile's runTimeoutMinutes. */
  runTimeoutMs: number | null;
  /** `$XDG_CONFIG_HOME/coffer` (the profiles file) and `$XDG_STATE_HOME/coffer` (chains, last runs), absolute. */
  configDir: string;
  stateDir: string;
  /** XDG_CONFIG_HOME and XDG_STATE_HOME when set to absolute directories (the scheduled units get them); else null. */
  xdgConfigHome: string | null;
  xdgStateHome: string | null;
  /**
   * The client settings set to nothing (`COFFER_API_KEY=`): they count as unset, but a profile never fills them in
   * (docs/client.md#profiles) and an empty COFFER_PASSPHRASE means "no passphrase here", never a prompt.
   */
  emptySettings: string[];
}

/**
 * The environment the client's child processes inherit, as any child would (a profile's hooks: src/cli/agent/hooks.ts
 * leaves out the secrets). Passed through whole rather than read as settings, but read here like every variable.
 */
export function inheritedEnvironment(env: Env = process.env): Env {
  return { ...env };
}

/** The variables a profile can supply (docs/client.md#profiles): together they name an account and where it seals to. */
export const PROFILE_VARIABLES = ['COFFER_URL', 'COFFER_API_KEY', 'COFFER_BLOB_API_URL', 'COFFER_RECIPIENT'] as const;
export type ProfileVariable = (typeof PROFILE_VARIABLES)[number];

/** The profile-suppliable variables set to a value in the environment (trimmed). */
export function givenOverProfile(env: Env = process.env): Partial<Record<ProfileVariable, string>> {
  const given: Partial<Record<ProfileVariable, string>> = {};
  for (const name of PROFILE_VARIABLES) {
    const value = (env[name] ?? '').trim();
    if (value !== '') given[name] = value;
  }
  return given;
}

/** An absolute directory from an XDG variable (relative values are ignored, as the XDG spec says), else the default. */
function xdgDir(env: Env, setting: Setting, fallback: string[]): string {
  const value = read(env, setting);
  const base = value !== null && path.isAbsolute(value) ? value : path.join(os.homedir(), ...fallback);
  return path.join(base, 'coffer');
}

/** The client settings from the environment, over what the selected profile supplies (`profile`). */
export function loadClientConfig(env: Env = process.env, profile: ProfileSettings = {}): ClientConfig {
  const S = CLIENT_SETTINGS;
  const absolute = (value: string | null) => (value && path.isAbsolute(value) ? value : null);
  const exactly = new Set(['COFFER_PASSPHRASE', 'COFFER_NEW_PASSPHRASE']); // spaces are a passphrase
  const emptySettings = Object.keys(S).filter((name) => {
    const value = env[name];
    return value !== undefined && (exactly.has(name) ? value : value.trim()) === '';
  });
  // A variable set to nothing is not filled in by the profile: an empty COFFER_API_KEY is never the profile's key.
  env = { ...env };
  for (const [name, value] of Object.entries(profile)) if (env[name] === undefined) env[name] = value;
  return {
    url: url(env, S.COFFER_URL),
    apiKey: text(env, S.COFFER_API_KEY),
    blobApiUrl: url(env, S.COFFER_BLOB_API_URL),
    passphrase: exact(env, S.COFFER_PASSPHRASE),
    newPassphrase: exact(env, S.COFFER_NEW_PASSPHRASE),
    kdf: oneOf(env, S.COFFER_KDF),
    maxArchiveBytes: integer(env, S.COFFER_MAX_ARCHIVE_BYTES, 1, Number.MAX_SAFE_INTEGER),
    recipient: text(env, S.COFFER_RECIPIENT),
    profileName: text(env, S.COFFER_PROFILE),
    acceptOlderKeys: text(env, S.COFFER_ACCEPT_OLDER_KEYS) === '1',
    requestTimeoutMs: duration(env, S.COFFER_REQUEST_TIMEOUT, 100),
    stallWindowMs: duration(env, S.COFFER_STALL_WINDOW, 100),
    runTimeoutMs: optionalDuration(env, S.COFFER_RUN_TIMEOUT, 1000),
    configDir: xdgDir(env, S.XDG_CONFIG_HOME, ['.config']),
    stateDir: xdgDir(env, S.XDG_STATE_HOME, ['.local', 'state']),
    xdgConfigHome: absolute(env.XDG_CONFIG_HOME ?? null),
    xdgStateHome: absolute(env.XDG_STATE_HOME ?? null),
    emptySettings,
  };
}
