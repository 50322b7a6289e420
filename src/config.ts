import os from 'node:os';
import path from 'node:path';
import { type KdfProfile } from './domain/kdf.js';
import { API_KEY_PATTERN } from './domain/keys.js';
import { type Plan } from './domain/plans.js';
import type { PlanQuotas } from './domain/quotas.js';

import {
  ConfigError,
  checkDatabaseUrl,
  duration,
  exact,
  fromFile,
  integer,
  oneOf,
  optionalDuration,
  orphanGrace,
  planQuotas,
  read,
  secret,
  text,
  trustedProxies,
  url,
  type Env,
} from './config-readers.js';
import {
  CLIENT_SETTINGS,
  DEFAULT_LIMITS,
  SERVER_SETTINGS,
  type ConnectionLimits,
  type LogLevel,
  type ProfileSettings,
  type Setting,
} from './config-settings.js';

export { ConfigError, parseDuration } from './config-readers.js';
export {
  CLIENT_SETTINGS,
  DEFAULT_LIMITS,
  SERVER_SETTINGS,
  type ConnectionLimits,
  type LogLevel,
  type ProfileSettings,
  type Setting,
} from './config-settings.js';
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
   * COFFER_ACCEL_REDIRECT: the prefix of nginx's `internal` location that serves `COFFER_DATA_DIR/blobs/` (fs store)
   * or proxies the object store (S3 store); set, downloads that come through a COFFER_TRUST_PROXY proxy are answered
   * with `X-Accel-Redirect: <prefix>/<blob key>` (fs) or `<prefix>/<ETag>/<bucket>/<key>?<presigned query>` (S3)
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
    /** COFFER_S3_PRESIGNED: clients may move the bytes themselves under presigned URLs (docs/upload-protocols.md). */
    presigned: boolean;
    /** COFFER_S3_PUBLIC_ENDPOINT: the endpoint presigned URLs name (null: `endpoint`). */
    publicEndpoint: string | null;
    /** COFFER_S3_URL_LIFETIME: how long a presigned URL is valid. */
    urlLifetimeMs: number;
    /** COFFER_S3_OBJECT_LOCK: off, or the Object Lock mode of every backup object (docs/deploy.md#object-lock). */
    objectLock: 'off' | 'governance' | 'compliance';
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
  /** COFFER_DRILL_MAX_AGE: an account whose newest restore drill is older is stale (docs/operations.md#restore-drills). */
  drillMaxAgeMs: number;
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
    presigned: oneOf(env, S.COFFER_S3_PRESIGNED) === 'on',
    publicEndpoint: url(env, S.COFFER_S3_PUBLIC_ENDPOINT),
    urlLifetimeMs: duration(env, S.COFFER_S3_URL_LIFETIME, 1000),
    objectLock: oneOf(env, S.COFFER_S3_OBJECT_LOCK),
  };
  if (s3.urlLifetimeMs > 7 * 24 * 3600_000) throw new ConfigError(S.COFFER_S3_URL_LIFETIME.name, 'must be at most 7d (S3 refuses longer)');
  if (s3.presigned && blobStore !== 's3') throw new ConfigError(S.COFFER_S3_PRESIGNED.name, 'works only with COFFER_BLOB_STORE=s3');
  if (s3.objectLock !== 'off' && blobStore !== 's3') {
    throw new ConfigError(
      S.COFFER_S3_OBJECT_LOCK.name,
      'needs COFFER_BLOB_STORE=s3: the filesystem store cannot keep a backup from being deleted (docs/deploy.md#object-lock)',
    );
  }
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
    drillMaxAgeMs: duration(env, S.COFFER_DRILL_MAX_AGE, 60_000),
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
  /** COFFER_STALL_WINDOW: the window of the stall rule of uploads and downloads (src/client/sdk-transfer.ts TransferWatch). */
  stallWindowMs: number;
  /** COFFER_RUN_TIMEOUT: the deadline of one agent run; null: the profile's runTimeoutMinutes. */
  runTimeoutMs: number | null;
  /** `$XDG_CONFIG_HOME/coffer` (the profiles file) and `$XDG_STATE_HOME/coffer` (chains, last runs), absolute. */
  configDir: string;
  stateDir: string;
  /** XDG_CONFIG_HOME and XDG_STATE_HOME when set to absolute directories (the scheduled units get them); else null. */
  xdgConfigHome: string | null;
  xdgStateHome: string | null;
  /** USER: the OS user, archived as the owner of this user's files (src/client/scan.ts); '' when unset. */
  ownerName: string;
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
    ownerName: env.USER || '',
    emptySettings,
  };
}
