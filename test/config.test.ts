/**
 * The environment → settings step (src/config.ts) of the server (loadConfig) and of the client commands
 * (loadClientConfig), called directly: defaults, durations, and one line per bad value.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_LIMITS, loadClientConfig, loadConfig, parseDuration } from '../src/config.js';
import { tempDir } from './helpers/tmp.js';

const KEY = `cfk_${'A'.repeat(43)}`;

/** What `load` throws: a ConfigError, its message one line. */
function configError(load: () => unknown): ConfigError {
  try {
    load();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).not.toContain('\n');
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError, the configuration loaded');
}

describe('parseDuration', () => {
  it('reads <n>ms|s|m|h|d', () => {
    const cases: [string, number][] = [
      ['250ms', 250],
      ['2s', 2000],
      ['10m', 600_000],
      ['1h', 3_600_000],
      ['30d', 30 * 86_400_000],
      ['0s', 0],
      [' 5m ', 300_000],
    ];
    for (const [text, ms] of cases) expect(parseDuration(text), text).toBe(ms);
  });

  it('returns null for anything else', () => {
    for (const text of ['', '2', 's', '2x', '2 s', '2S', '1.5h', '-1s', '+1s', '1h30m', '2sec', '1e3ms', '99999999999999999999d']) {
      expect(parseDuration(text), text).toBeNull();
    }
  });
});

describe('loadConfig', () => {
  it('defaults when nothing is set (blank counts as unset)', () => {
    const expected = {
      port: 8080,
      host: '0.0.0.0',
      publicUrl: 'http://localhost:8080',
      publicUrlGiven: false,
      dataDir: '/srv/coffer/data',
      databaseUrl: null,
      sqliteDriver: null,
      blobStore: 'fs',
      accelRedirect: null,
      s3: {
        endpoint: null,
        bucket: null,
        region: 'us-east-1',
        accessKeyId: null,
        secretAccessKey: null,
        presigned: false,
        publicEndpoint: null,
        urlLifetimeMs: 900_000,
        objectLock: 'off',
      },
      uploadProtocol: 'direct',
      maxArchiveBytes: 52_428_800,
      planQuotas: {},
      uploadWindowMs: 3_600_000,
      orphanGraceMs: 3_600_000,
      sseIntervalMs: 2000,
      sseTimeoutMs: 300_000,
      sseMaxStreams: { perAccount: 100, perAddress: 500 },
      trustProxy: [],
      metricsToken: null,
      drillMaxAgeMs: 14 * 86_400_000,
      metadataCache: { maxBytes: 64 * 1024 * 1024, ttlMs: 1000 },
      sweepIntervalMs: 60_000,
      limits: { ...DEFAULT_LIMITS, maxConnections: 20_000 },
      signInLimit: { maxAttempts: 30, windowMs: 600_000 },
      maxMultipartUploadsPerSlot: 4,
      logLevel: 'info',
      initialApiKey: null,
      initialPlan: 'pro',
    };
    expect(loadConfig({}, '/srv/coffer')).toEqual(expected);
    expect(loadConfig({ PORT: ' ', COFFER_UPLOAD_WINDOW: '', LOG_LEVEL: '  ' }, '/srv/coffer')).toEqual(expected);
  });

  it('reads every variable that is set', () => {
    const config = loadConfig(
      {
        PORT: '9000',
        HOST: '127.0.0.1',
        COFFER_PUBLIC_URL: 'https://backups.example.org/',
        COFFER_DATA_DIR: 'state',
        COFFER_DATABASE_URL: 'postgresql://coffer@db/coffer',
        COFFER_SQLITE_DRIVER: 'better-sqlite3',
        COFFER_BLOB_STORE: 's3',
        COFFER_S3_ENDPOINT: 'http://s3.local:9000',
        COFFER_S3_BUCKET: 'coffer',
        COFFER_S3_REGION: 'eu-west-1',
        COFFER_S3_ACCESS_KEY_ID: 'id',
        COFFER_S3_SECRET_ACCESS_KEY: 'secret',
        COFFER_UPLOAD_PROTOCOL: 'blobhost-client',
        COFFER_MAX_ARCHIVE_BYTES: '1048576',
        COFFER_UPLOAD_WINDOW: '10m',
        COFFER_QUOTA_FREE: '1000',
        COFFER_QUOTA_PRO: '0',
        COFFER_ORPHAN_GRACE: '30s',
        COFFER_SSE_INTERVAL: '250ms',
        COFFER_SSE_TIMEOUT: '1h',
        COFFER_SSE_MAX_PER_ACCOUNT: '3',
        COFFER_SSE_MAX_PER_ADDRESS: '7',
        COFFER_MAX_CONNECTIONS: '60000',
        COFFER_TRUST_PROXY: '127.0.0.1, 10.0.0.0/8,fd00::/8,loopback',
        COFFER_METRICS_TOKEN: 'metrics-token-0123',
        COFFER_DRILL_MAX_AGE: '30d',
        COFFER_SIGNIN_ATTEMPTS: '5',
        COFFER_SIGNIN_WINDOW: '2s',
        LOG_LEVEL: 'warn',
        COFFER_INITIAL_API_KEY: ` ${KEY} `,
        COFFER_INITIAL_PLAN: 'free',
      },
      '/srv/coffer',
    );
    expect(config).toMatchObject({
      port: 9000,
      host: '127.0.0.1',
      publicUrl: 'https://backups.example.org',
      publicUrlGiven: true,
      dataDir: '/srv/coffer/state',
      databaseUrl: 'postgresql://coffer@db/coffer',
      sqliteDriver: 'better-sqlite3',
      blobStore: 's3',
      s3: { endpoint: 'http://s3.local:9000', bucket: 'coffer', region: 'eu-west-1', accessKeyId: 'id', secretAccessKey: 'secret' },
      uploadProtocol: 'blobhost-client',
      maxArchiveBytes: 1_048_576,
      planQuotas: { free: 1000, pro: 0 },
      uploadWindowMs: 600_000,
      orphanGraceMs: 30_000,
      sseIntervalMs: 250,
      sseTimeoutMs: 3_600_000,
      sseMaxStreams: { perAccount: 3, perAddress: 7 },
      limits: { ...DEFAULT_LIMITS, maxConnections: 60_000 },
      trustProxy: ['127.0.0.1', '10.0.0.0/8', 'fd00::/8', 'loopback'],
      metricsToken: 'metrics-token-0123',
      drillMaxAgeMs: 30 * 86_400_000,
      signInLimit: { maxAttempts: 5, windowMs: 2000 },
      logLevel: 'warn',
      initialApiKey: KEY,
      initialPlan: 'free',
    });
    expect(loadConfig({ PORT: '9000' }).publicUrl).toBe('http://localhost:9000');
    const s3 = { COFFER_BLOB_STORE: 's3', COFFER_S3_BUCKET: 'b', COFFER_S3_ENDPOINT: 'http://127.0.0.1:7480' };
    expect(
      loadConfig({ ...s3, COFFER_S3_PRESIGNED: 'on', COFFER_S3_PUBLIC_ENDPOINT: 'https://s3.example.com/', COFFER_S3_URL_LIFETIME: '7d' })
        .s3,
    ).toMatchObject({ presigned: true, publicEndpoint: 'https://s3.example.com', urlLifetimeMs: 7 * 86_400_000 });
    expect(loadConfig({ COFFER_ACCEL_REDIRECT: ' /internal/coffer-blobs ' }).accelRedirect).toBe('/internal/coffer-blobs');
    // With the S3 store too: nginx proxies the object store (docs/deploy.md#downloads-served-by-nginx).
    expect(loadConfig({ COFFER_ACCEL_REDIRECT: '/_coffer_s3', COFFER_BLOB_STORE: 's3', COFFER_S3_BUCKET: 'b' }).accelRedirect).toBe(
      '/_coffer_s3',
    );
  });

  it('an invalid value stops with one line naming the variable', () => {
    const duration = (text: string) => `expected a duration like 2s, 5m or 1h, got "${text}"`;
    const cases: [Record<string, string>, string, string][] = [
      [{ PORT: 'eighty' }, 'PORT', 'expected a whole number, got "eighty"'],
      [{ PORT: '-1' }, 'PORT', 'expected a whole number, got "-1"'],
      [{ PORT: '65536' }, 'PORT', 'must be between 0 and 65535, got 65536'],
      [{ COFFER_PUBLIC_URL: 'backups.example.org' }, 'COFFER_PUBLIC_URL', 'expected an http(s) URL, got "backups.example.org"'],
      [{ COFFER_PUBLIC_URL: 'ftp://example.org' }, 'COFFER_PUBLIC_URL', 'expected an http(s) URL, got "ftp://example.org"'],
      [{ COFFER_DATABASE_URL: 'mysql://db/coffer' }, 'COFFER_DATABASE_URL', 'expected a postgres:// URL'],
      [{ COFFER_SQLITE_DRIVER: 'sqlite3' }, 'COFFER_SQLITE_DRIVER', 'must be one of node, better-sqlite3, got "sqlite3"'],
      [{ COFFER_BLOB_STORE: 'gcs' }, 'COFFER_BLOB_STORE', 'must be one of fs, s3, got "gcs"'],
      [{ COFFER_BLOB_STORE: 's3' }, 'COFFER_S3_BUCKET', 'is required when COFFER_BLOB_STORE=s3'],
      ...['_coffer_blobs', '/_coffer_blobs/', '/a/../b', '/a//b', '/a b', '/.hidden', 'http://x/y'].map(
        (text): [Record<string, string>, string, string] => [
          { COFFER_ACCEL_REDIRECT: text },
          'COFFER_ACCEL_REDIRECT',
          `expected a location path like /_coffer_blobs (no trailing slash), got "${text}"`,
        ],
      ),
      [{ COFFER_S3_PRESIGNED: 'on' }, 'COFFER_S3_PRESIGNED', 'works only with COFFER_BLOB_STORE=s3'],
      [{ COFFER_S3_PRESIGNED: 'yes' }, 'COFFER_S3_PRESIGNED', 'must be one of off, on, got "yes"'],
      [{ COFFER_S3_PUBLIC_ENDPOINT: 's3.example.com' }, 'COFFER_S3_PUBLIC_ENDPOINT', 'expected an http(s) URL, got "s3.example.com"'],
      [{ COFFER_S3_URL_LIFETIME: '500ms' }, 'COFFER_S3_URL_LIFETIME', duration('500ms')],
      [{ COFFER_S3_URL_LIFETIME: '8d' }, 'COFFER_S3_URL_LIFETIME', 'must be at most 7d (S3 refuses longer)'],
      [{ COFFER_UPLOAD_PROTOCOL: 'tus' }, 'COFFER_UPLOAD_PROTOCOL', 'must be one of direct, blobhost-client, got "tus"'],
      [{ COFFER_MAX_ARCHIVE_BYTES: '50MiB' }, 'COFFER_MAX_ARCHIVE_BYTES', 'expected a whole number, got "50MiB"'],
      [{ COFFER_MAX_ARCHIVE_BYTES: '0' }, 'COFFER_MAX_ARCHIVE_BYTES', `must be between 1 and ${Number.MAX_SAFE_INTEGER}, got 0`],
      [{ COFFER_UPLOAD_WINDOW: '1 hour' }, 'COFFER_UPLOAD_WINDOW', duration('1 hour')],
      [{ COFFER_UPLOAD_WINDOW: '0s' }, 'COFFER_UPLOAD_WINDOW', duration('0s')],
      [{ COFFER_ORPHAN_GRACE: '1 hour' }, 'COFFER_ORPHAN_GRACE', 'expected a duration like 30s, 5m or 1h, got "1 hour"'],
      [{ COFFER_SSE_INTERVAL: '2w' }, 'COFFER_SSE_INTERVAL', duration('2w')],
      [{ COFFER_SSE_INTERVAL: '9ms' }, 'COFFER_SSE_INTERVAL', duration('9ms')],
      [{ COFFER_SSE_TIMEOUT: '300' }, 'COFFER_SSE_TIMEOUT', duration('300')],
      [{ COFFER_SSE_MAX_PER_ACCOUNT: '0' }, 'COFFER_SSE_MAX_PER_ACCOUNT', 'must be between 1 and 1000000, got 0'],
      [{ COFFER_SSE_MAX_PER_ADDRESS: 'many' }, 'COFFER_SSE_MAX_PER_ADDRESS', 'expected a whole number, got "many"'],
      [{ COFFER_MAX_CONNECTIONS: '0' }, 'COFFER_MAX_CONNECTIONS', 'must be between 1 and 10000000, got 0'],
      [{ COFFER_MAX_CONNECTIONS: '20k' }, 'COFFER_MAX_CONNECTIONS', 'expected a whole number, got "20k"'],
      [{ COFFER_MAX_CONNECTIONS: '-1' }, 'COFFER_MAX_CONNECTIONS', 'expected a whole number, got "-1"'],
      [{ COFFER_MAX_CONNECTIONS: '10000001' }, 'COFFER_MAX_CONNECTIONS', 'must be between 1 and 10000000, got 10000001'],
      [{ COFFER_DRILL_MAX_AGE: '2 weeks' }, 'COFFER_DRILL_MAX_AGE', duration('2 weeks')],
      [{ COFFER_DRILL_MAX_AGE: '30s' }, 'COFFER_DRILL_MAX_AGE', duration('30s')],
      [{ COFFER_METRICS_TOKEN: 'short' }, 'COFFER_METRICS_TOKEN', 'expected at least 16 printable characters without spaces'],
      [{ COFFER_METRICS_TOKEN: 'has a space in it!' }, 'COFFER_METRICS_TOKEN', 'expected at least 16 printable characters without spaces'],
      ...[
        ['nginx', 'nginx'],
        ['10.0.0.0/33', '10.0.0.0/33'],
        ['10.0.0.1/', '10.0.0.1/'],
        ['10.0.0.0/8/1', '10.0.0.0/8/1'],
        ['127.0.0.1,', ''],
        ['127.0.0.1, 2', '2'],
        ['true', 'true'],
      ].map(([text, bad]): [Record<string, string>, string, string] => [
        { COFFER_TRUST_PROXY: text! },
        'COFFER_TRUST_PROXY',
        `expected a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) or loopback/linklocal/uniquelocal, got "${bad}"`,
      ]),
      [{ COFFER_SIGNIN_ATTEMPTS: '1000001' }, 'COFFER_SIGNIN_ATTEMPTS', 'must be between 1 and 1000000, got 1000001'],
      [{ COFFER_SIGNIN_WINDOW: '999ms' }, 'COFFER_SIGNIN_WINDOW', duration('999ms')],
      [{ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL', 'must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"'],
      [{ COFFER_INITIAL_API_KEY: 'cfk_short' }, 'COFFER_INITIAL_API_KEY', 'expected cfk_ followed by 43 base64url characters'],
      [{ COFFER_INITIAL_PLAN: 'gold' }, 'COFFER_INITIAL_PLAN', 'must be one of free, plus, pro, got "gold"'],
    ];
    for (const [env, variable, problem] of cases) {
      const error = configError(() => loadConfig(env));
      expect([error.variable, error.message], JSON.stringify(env)).toEqual([variable, `${variable}: ${problem}`]);
    }
  });

  it('the orphan grace is at least an hour and the upload window unless COFFER_ORPHAN_GRACE is set (0 too)', () => {
    expect(loadConfig({ COFFER_UPLOAD_WINDOW: '2h' }).orphanGraceMs).toBe(7_200_000);
    expect(loadConfig({ COFFER_UPLOAD_WINDOW: '2s' }).orphanGraceMs).toBe(3_600_000);
    expect(loadConfig({ COFFER_UPLOAD_WINDOW: '2h', COFFER_ORPHAN_GRACE: '0s' }).orphanGraceMs).toBe(0);
  });

  it('durations at their minimum are accepted', () => {
    const config = loadConfig({ COFFER_UPLOAD_WINDOW: '1ms', COFFER_SSE_INTERVAL: '10ms', COFFER_SIGNIN_WINDOW: '1s' });
    expect([config.uploadWindowMs, config.sseIntervalMs, config.signInLimit.windowMs]).toEqual([1, 10, 1000]);
  });
});

describe('loadConfig: secrets from files (X_FILE)', () => {
  const dir = tempDir('coffer-secrets-');
  const file = (name: string, content: string, mode = 0o600) => {
    const at = path.join(dir, name);
    fs.writeFileSync(at, content, { mode });
    return at;
  };
  const TOKEN = 'metrics-token-from-a-file';

  it('each secret setting reads its _FILE: the text without one trailing newline', () => {
    const config = loadConfig({
      COFFER_METRICS_TOKEN_FILE: file('token', `${TOKEN}\n`),
      COFFER_S3_SECRET_ACCESS_KEY_FILE: file('s3', ' s3 secret with spaces \r\n'),
      COFFER_DATABASE_URL_FILE: file('db', 'postgres://coffer:pw@db/coffer\n'),
      COFFER_INITIAL_API_KEY_FILE: file('key', KEY),
    });
    expect(config.metricsToken).toBe(TOKEN);
    expect(config.s3.secretAccessKey).toBe(' s3 secret with spaces ');
    expect(config.databaseUrl).toBe('postgres://coffer:pw@db/coffer');
    expect(config.initialApiKey).toBe(KEY);
    // Only one newline goes: a second one is part of the value (and here makes the token invalid).
    const error = configError(() => loadConfig({ COFFER_METRICS_TOKEN_FILE: file('two', `${TOKEN}\n\n`) }));
    expect(error.message).toBe('COFFER_METRICS_TOKEN_FILE: expected at least 16 printable characters without spaces');
  });

  it('both X and X_FILE, an unreadable or empty file: one line naming the variable, never the secret', () => {
    const secretText = 'postgres://coffer:hunter2-secret@db/coffer';
    const missing = path.join(dir, 'missing');
    const cases: [Record<string, string>, string][] = [
      [
        { COFFER_DATABASE_URL: secretText, COFFER_DATABASE_URL_FILE: file('db2', secretText) },
        'COFFER_DATABASE_URL_FILE: set either COFFER_DATABASE_URL or COFFER_DATABASE_URL_FILE, not both',
      ],
      [
        { COFFER_METRICS_TOKEN: TOKEN, COFFER_METRICS_TOKEN_FILE: missing },
        'COFFER_METRICS_TOKEN_FILE: set either COFFER_METRICS_TOKEN or COFFER_METRICS_TOKEN_FILE, not both',
      ],
      [{ COFFER_S3_SECRET_ACCESS_KEY_FILE: missing }, `COFFER_S3_SECRET_ACCESS_KEY_FILE: cannot read the file "${missing}": no such file`],
      [{ COFFER_INITIAL_API_KEY_FILE: dir }, `COFFER_INITIAL_API_KEY_FILE: cannot read the file "${dir}": it is a directory`],
      [{ COFFER_METRICS_TOKEN_FILE: file('empty', '\n') }, `COFFER_METRICS_TOKEN_FILE: the file "${path.join(dir, 'empty')}" is empty`],
      [
        { COFFER_DATABASE_URL_FILE: file('mysql', 'mysql://root:hunter2-secret@db/x\n') },
        'COFFER_DATABASE_URL_FILE: expected a postgres:// URL',
      ],
      [
        { COFFER_INITIAL_API_KEY_FILE: file('badkey', 'cfk_hunter2-secret\n') },
        'COFFER_INITIAL_API_KEY_FILE: expected cfk_ followed by 43 base64url characters',
      ],
    ];
    if (process.getuid?.() !== 0) {
      const locked = file('locked', secretText, 0o000);
      cases.push([{ COFFER_DATABASE_URL_FILE: locked }, `COFFER_DATABASE_URL_FILE: cannot read the file "${locked}": permission denied`]);
    }
    for (const [env, message] of cases) {
      const error = configError(() => loadConfig(env));
      expect(error.message, JSON.stringify(env)).toBe(message);
      expect(error.message).not.toContain('hunter2');
      expect(error.message).not.toContain(TOKEN);
    }
  });
});

describe('loadClientConfig', () => {
  it('defaults when nothing is set (blank counts as unset)', () => {
    const expected = {
      url: 'http://localhost:8080',
      apiKey: null,
      blobApiUrl: null,
      passphrase: null,
      newPassphrase: null,
      kdf: 'moderate',
      maxArchiveBytes: null,
      recipient: null,
      profileName: null,
      acceptOlderKeys: false,
      requestTimeoutMs: 120_000,
      stallWindowMs: 60_000,
      runTimeoutMs: null,
      configDir: path.join(os.homedir(), '.config', 'coffer'),
      stateDir: path.join(os.homedir(), '.local', 'state', 'coffer'),
      xdgConfigHome: null,
      xdgStateHome: null,
      ownerName: '',
      emptySettings: [],
    };
    expect(loadClientConfig({})).toEqual(expected);
    // A relative XDG directory is ignored, as the XDG spec says.
    expect(loadClientConfig({ XDG_CONFIG_HOME: 'relative', XDG_STATE_HOME: ' ' })).toEqual({
      ...expected,
      emptySettings: ['XDG_STATE_HOME'],
    });
    const blank = {
      COFFER_URL: ' ',
      COFFER_API_KEY: '',
      COFFER_BLOB_API_URL: '  ',
      COFFER_KDF: '',
      COFFER_MAX_ARCHIVE_BYTES: '',
      COFFER_RECIPIENT: ' ',
    };
    // Each counts as unset, and is named as set to nothing (a profile never fills it in; an empty passphrase is not asked for).
    expect(loadClientConfig({ ...blank, COFFER_PASSPHRASE: '', COFFER_NEW_PASSPHRASE: '' })).toEqual({
      ...expected,
      emptySettings: [
        'COFFER_URL',
        'COFFER_API_KEY',
        'COFFER_BLOB_API_URL',
        'COFFER_PASSPHRASE',
        'COFFER_NEW_PASSPHRASE',
        'COFFER_RECIPIENT',
        'COFFER_KDF',
        'COFFER_MAX_ARCHIVE_BYTES',
      ],
    });
    // A profile's value never fills a variable set to nothing; spaces are a passphrase, not nothing.
    const filled = loadClientConfig(
      { COFFER_API_KEY: '', COFFER_PASSPHRASE: ' ' },
      { COFFER_API_KEY: 'profile-key', COFFER_URL: 'http://x.test' },
    );
    expect([filled.apiKey, filled.url, filled.passphrase, filled.emptySettings]).toEqual([null, 'http://x.test', ' ', ['COFFER_API_KEY']]);
  });

  it('reads every variable; passphrases exactly as given, everything else trimmed', () => {
    expect(
      loadClientConfig({
        COFFER_URL: ' https://backups.example.org/coffer/ ',
        COFFER_API_KEY: ` ${KEY}\n`,
        COFFER_BLOB_API_URL: 'https://blobs.example.org/',
        COFFER_PASSPHRASE: ' correct horse ',
        COFFER_NEW_PASSPHRASE: 'battery staple\n',
        COFFER_KDF: 'min',
        COFFER_MAX_ARCHIVE_BYTES: '1048576',
        COFFER_RECIPIENT: ' coffer1abc\n',
        COFFER_PROFILE: ' home ',
        COFFER_ACCEPT_OLDER_KEYS: ' 1 ',
        COFFER_REQUEST_TIMEOUT: '30s',
        COFFER_STALL_WINDOW: '5s',
        COFFER_RUN_TIMEOUT: '6h',
        XDG_CONFIG_HOME: '/etc/xdg-config',
        XDG_STATE_HOME: '/var/xdg-state',
        USER: 'alice',
      }),
    ).toEqual({
      url: 'https://backups.example.org/coffer',
      apiKey: KEY,
      blobApiUrl: 'https://blobs.example.org',
      passphrase: ' correct horse ',
      newPassphrase: 'battery staple\n',
      kdf: 'min',
      maxArchiveBytes: 1_048_576,
      recipient: 'coffer1abc',
      profileName: 'home',
      acceptOlderKeys: true,
      requestTimeoutMs: 30_000,
      stallWindowMs: 5000,
      runTimeoutMs: 6 * 3_600_000,
      configDir: '/etc/xdg-config/coffer',
      stateDir: '/var/xdg-state/coffer',
      xdgConfigHome: '/etc/xdg-config',
      xdgStateHome: '/var/xdg-state',
      ownerName: 'alice',
      emptySettings: [],
    });
  });

  it('a profile supplies what the environment leaves unset (but never fills a variable set to nothing); a set variable wins', () => {
    const profile = { COFFER_URL: 'https://profile.example.org/', COFFER_API_KEY: KEY, COFFER_RECIPIENT: 'coffer1profile' };
    expect(loadClientConfig({ COFFER_URL: ' ' }, profile)).toMatchObject({ url: 'http://localhost:8080', emptySettings: ['COFFER_URL'] });
    expect(loadClientConfig({}, profile)).toMatchObject({
      url: 'https://profile.example.org',
      apiKey: KEY,
      recipient: 'coffer1profile',
    });
    expect(loadClientConfig({ COFFER_URL: 'http://env.example.org', COFFER_RECIPIENT: 'coffer1env' }, profile)).toMatchObject({
      url: 'http://env.example.org',
      apiKey: KEY,
      recipient: 'coffer1env',
    });
  });

  it('an invalid value stops with one line naming the variable', () => {
    const cases: [Record<string, string>, string, string][] = [
      [{ COFFER_URL: 'ftp://example.org' }, 'COFFER_URL', 'expected an http(s) URL, got "ftp://example.org"'],
      [{ COFFER_URL: 'localhost:8080' }, 'COFFER_URL', 'expected an http(s) URL, got "localhost:8080"'],
      [{ COFFER_URL: 'http://' }, 'COFFER_URL', 'expected an http(s) URL, got "http://"'],
      [{ COFFER_BLOB_API_URL: 'blobs.example.org' }, 'COFFER_BLOB_API_URL', 'expected an http(s) URL, got "blobs.example.org"'],
      [{ COFFER_KDF: 'bogus' }, 'COFFER_KDF', 'must be one of min, interactive, moderate, sensitive, got "bogus"'],
      [{ COFFER_KDF: 'Moderate' }, 'COFFER_KDF', 'must be one of min, interactive, moderate, sensitive, got "Moderate"'],
      [{ COFFER_MAX_ARCHIVE_BYTES: '1MiB' }, 'COFFER_MAX_ARCHIVE_BYTES', 'expected a whole number, got "1MiB"'],
      [{ COFFER_MAX_ARCHIVE_BYTES: '-5' }, 'COFFER_MAX_ARCHIVE_BYTES', 'expected a whole number, got "-5"'],
      [{ COFFER_MAX_ARCHIVE_BYTES: '0' }, 'COFFER_MAX_ARCHIVE_BYTES', `must be between 1 and ${Number.MAX_SAFE_INTEGER}, got 0`],
    ];
    for (const [env, variable, problem] of cases) {
      const error = configError(() => loadClientConfig(env));
      expect([error.variable, error.message], JSON.stringify(env)).toEqual([variable, `${variable}: ${problem}`]);
    }
  });
});
