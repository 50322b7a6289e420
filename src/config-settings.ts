/**
 * The settings tables, the one list of every environment variable of the server (SERVER_SETTINGS) and of the client
 * commands (CLIENT_SETTINGS), and the server's connection limits: src/config.ts reads them, `--help` prints them.
 * Everything else imports them through src/config.ts.
 */
import { DEFAULT_KDF_PROFILE, KDF_PROFILE_NAMES } from './domain/kdf.js';
import { PLANS } from './domain/plans.js';

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

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
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
      "behind nginx: nginx's internal location of COFFER_DATA_DIR/blobs (fs store) or proxying COFFER_S3_ENDPOINT (S3 store), e.g. /_coffer_blobs; downloads through a COFFER_TRUST_PROXY proxy then use X-Accel-Redirect (unset: off)",
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
  COFFER_S3_PRESIGNED: {
    default: 'off',
    values: ['off', 'on'],
    about:
      'S3 store: clients that ask move archive bytes to and from the bucket themselves, under short-lived presigned URLs ' +
      '(docs/upload-protocols.md); the bucket must be reachable from clients at COFFER_S3_PUBLIC_ENDPOINT',
  },
  COFFER_S3_OBJECT_LOCK: {
    default: 'off',
    values: ['off', 'governance', 'compliance'],
    about:
      'S3 store: lock every backup object until its expiry plus the deletion grace (S3 Object Lock) in this mode; the bucket ' +
      'must have been created with Object Lock enabled, and one that has it needs a mode (docs/deploy.md#object-lock)',
  },
  COFFER_S3_PUBLIC_ENDPOINT: {
    default: null,
    about: 'the S3 endpoint as clients reach it, for presigned URLs (unset: COFFER_S3_ENDPOINT)',
  },
  COFFER_S3_URL_LIFETIME: { default: '15m', about: 'how long a presigned S3 URL is valid (1s to 7d)' },
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
  COFFER_DRILL_MAX_AGE: {
    default: '14d',
    about: 'a drilled account whose newest restore drill is older is stale (/metrics, coffer admin usage)',
  },
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
