import path from 'node:path';
import { DEFAULT_KDF_PROFILE, KDF_PROFILE_NAMES, type KdfProfile } from './domain/kdf.js';
import { API_KEY_PATTERN } from './domain/keys.js';

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
  dataDir: string;
  databaseUrl: string | null;
  blobStore: 'fs' | 's3';
  s3: {
    endpoint: string | null;
    bucket: string | null;
    region: string;
    accessKeyId: string | null;
    secretAccessKey: string | null;
  };
  uploadProtocol: 'direct' | 'blobhost-client';
  maxArchiveBytes: number;
  uploadWindowMs: number;
  sseIntervalMs: number;
  sseTimeoutMs: number;
  /**
   * Event streams open at once per account and per client address; one more is refused in-stream
   * (docs/api-rules.md#events).
   */
  sseMaxStreams: { perAccount: number; perAddress: number };
  /** The bearer token `/metrics` requires; null: `/metrics` is not served (docs/operations.md#metrics). */
  metricsToken: string | null;
  /** How often the background sweeper runs; not an operator setting, fixed unless a test overrides it. */
  sweepIntervalMs: number;
  /** Protection against slow or idle clients (fixed defaults; tests shorten them). */
  limits: ConnectionLimits;
  /** Console sign-in attempts (API key or login link) allowed per client address and window. */
  signInLimit: { maxAttempts: number; windowMs: number };
  /** blobhost-client: multipart uploads one backup slot may have open at once (fixed; tests may change it). */
  maxMultipartUploadsPerSlot: number;
  logLevel: string;
  initialApiKey: string | null;
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
  /** Open connections at most (10,000 event streams must fit). */
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

function read(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function duration(env: Env, name: string, fallback: string, minMs = 1): number {
  const text = read(env, name) ?? fallback;
  const ms = parseDuration(text);
  if (ms === null || ms < minMs) throw new ConfigError(name, `expected a duration like 2s, 5m or 1h, got "${text}"`);
  return ms;
}

function integer<F extends number | null>(env: Env, name: string, fallback: F, min: number, max: number): number | F {
  const text = read(env, name);
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text)) throw new ConfigError(name, `expected a whole number, got "${text}"`);
  const value = Number(text);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const text = read(env, name) ?? fallback;
  if (!(allowed as readonly string[]).includes(text)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${text}"`);
  }
  return text as T;
}

/** An http(s) URL without trailing slashes; `fallback` when unset. */
function url<F extends string | null>(env: Env, name: string, fallback: F): string | F {
  const text = read(env, name);
  if (text === undefined) return fallback;
  try {
    const parsed = new URL(text);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('scheme');
  } catch {
    throw new ConfigError(name, `expected an http(s) URL, got "${text}"`);
  }
  return text.replace(/\/+$/, '');
}

export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  const port = integer(env, 'PORT', 8080, 0, 65535);
  const databaseUrl = read(env, 'COFFER_DATABASE_URL') ?? null;
  if (databaseUrl !== null && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('COFFER_DATABASE_URL', 'expected a postgres:// URL');
  }
  const blobStore = oneOf(env, 'COFFER_BLOB_STORE', ['fs', 's3'] as const, 'fs');
  const s3 = {
    endpoint: read(env, 'COFFER_S3_ENDPOINT') ?? null,
    bucket: read(env, 'COFFER_S3_BUCKET') ?? null,
    region: read(env, 'COFFER_S3_REGION') ?? 'us-east-1',
    accessKeyId: read(env, 'COFFER_S3_ACCESS_KEY_ID') ?? null,
    secretAccessKey: read(env, 'COFFER_S3_SECRET_ACCESS_KEY') ?? null,
  };
  if (blobStore === 's3' && s3.bucket === null) {
    throw new ConfigError('COFFER_S3_BUCKET', 'is required when COFFER_BLOB_STORE=s3');
  }
  const initialApiKey = read(env, 'COFFER_INITIAL_API_KEY') ?? null;
  if (initialApiKey !== null && !API_KEY_PATTERN.test(initialApiKey)) {
    throw new ConfigError('COFFER_INITIAL_API_KEY', 'expected cfk_ followed by 43 base64url characters');
  }
  const metricsToken = read(env, 'COFFER_METRICS_TOKEN') ?? null;
  if (metricsToken !== null && !/^[\x21-\x7e]{16,}$/.test(metricsToken)) {
    throw new ConfigError('COFFER_METRICS_TOKEN', 'expected at least 16 printable characters without spaces');
  }
  return {
    port,
    host: read(env, 'HOST') ?? '0.0.0.0',
    publicUrl: url(env, 'COFFER_PUBLIC_URL', `http://localhost:${port}`),
    dataDir: path.resolve(cwd, read(env, 'COFFER_DATA_DIR') ?? './data'),
    databaseUrl,
    blobStore,
    s3,
    uploadProtocol: oneOf(env, 'COFFER_UPLOAD_PROTOCOL', ['direct', 'blobhost-client'] as const, 'direct'),
    maxArchiveBytes: integer(env, 'COFFER_MAX_ARCHIVE_BYTES', 52_428_800, 1, Number.MAX_SAFE_INTEGER),
    uploadWindowMs: duration(env, 'COFFER_UPLOAD_WINDOW', '1h'),
    sseIntervalMs: duration(env, 'COFFER_SSE_INTERVAL', '2s', 10),
    sseTimeoutMs: duration(env, 'COFFER_SSE_TIMEOUT', '5m'),
    sseMaxStreams: {
      perAccount: integer(env, 'COFFER_SSE_MAX_PER_ACCOUNT', 100, 1, 1_000_000),
      perAddress: integer(env, 'COFFER_SSE_MAX_PER_ADDRESS', 500, 1, 1_000_000),
    },
    metricsToken,
    sweepIntervalMs: 60_000,
    limits: { ...DEFAULT_LIMITS },
    signInLimit: {
      maxAttempts: integer(env, 'COFFER_SIGNIN_ATTEMPTS', 30, 1, 1_000_000),
      windowMs: duration(env, 'COFFER_SIGNIN_WINDOW', '10m', 1000),
    },
    maxMultipartUploadsPerSlot: 4,
    logLevel: oneOf(env, 'LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info'),
    initialApiKey,
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
  /** COFFER_MAX_ARCHIVE_BYTES: the ciphertext limit the client enforces; null: the client's default. */
  maxArchiveBytes: number | null;
  /** COFFER_RECIPIENT: `coffer backup` seals to this recipient (no passphrase); the command parses it. null when unset. */
  recipient: string | null;
}

export function loadClientConfig(env: Env = process.env): ClientConfig {
  return {
    url: url(env, 'COFFER_URL', 'http://localhost:8080'),
    apiKey: read(env, 'COFFER_API_KEY') ?? null,
    blobApiUrl: url(env, 'COFFER_BLOB_API_URL', null),
    passphrase: env.COFFER_PASSPHRASE || null,
    newPassphrase: env.COFFER_NEW_PASSPHRASE || null,
    kdf: oneOf(env, 'COFFER_KDF', KDF_PROFILE_NAMES, DEFAULT_KDF_PROFILE),
    maxArchiveBytes: integer(env, 'COFFER_MAX_ARCHIVE_BYTES', null, 1, Number.MAX_SAFE_INTEGER),
    recipient: read(env, 'COFFER_RECIPIENT') ?? null,
  };
}
