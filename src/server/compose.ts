/** The composition root: turns a Config into running parts. The only place that picks implementations. */
import net from 'node:net';
import type { FastifyServerOptions } from 'fastify';
import { type Config, ConfigError, SERVER_SETTINGS } from '../config.js';
import type { BlobStore, DirectTransfers, MultipartBlobStore } from '../blobs/blob-store.js';
import { FsBlobStore } from '../blobs/fs.js';
import { type Clock, systemClock } from '../domain/clock.js';
import { LocalStatusBus, type StatusBus } from '../events/status-bus.js';
import { AttestationService } from '../services/attestations.js';
import { AuditTrail } from '../services/audit.js';
import { BackupService } from '../services/backups.js';
import type { BlobHostService } from '../services/blob-host.js';
import type { PresignedUploadService } from '../services/presigned-upload.js';
import { KeyService } from '../services/keys.js';
import { SessionService } from '../services/sessions.js';
import { OperatorService } from '../services/operator.js';
import { QuotaService } from '../services/quotas.js';
import { ReadPolicy } from '../services/read-policy.js';
import { RetentionService } from '../services/retention.js';
import type { UploadHandshake } from '../services/upload-handshake.js';
import type { Services } from '../services/services.js';
import { Sweeper, type SweeperOptions } from '../services/sweeper.js';
import { VaultService } from '../services/vault.js';
import { type ChangeFeed, type MetadataCache, cachedPorts } from '../store/cached-store.js';
import { openStores } from '../store/open.js';
import type { Stores } from '../store/ports/stores.js';
import type { CofferApp } from './app.js';
import { restrictFileModes } from './file-modes.js';

/** The services, and how to release what they hold (the status bus and the database). */
export interface Parts extends Services {
  close(): Promise<void>;
}

/** The bucket and the credentials of the S3 store, as configured. */
function s3Options(config: Config) {
  const { bucket, endpoint, region, accessKeyId, secretAccessKey } = config.s3;
  return { bucket: bucket!, endpoint, region, accessKeyId, secretAccessKey };
}

/** The configured blob store; both have the multipart capability, which the blob host needs. */
export async function openBlobStore(config: Config): Promise<MultipartBlobStore> {
  if (config.blobStore === 's3') {
    const { S3BlobStore } = await import('../blobs/s3.js');
    return new S3BlobStore({ ...s3Options(config), objectLock: config.s3.objectLock });
  }
  return new FsBlobStore(config.dataDir);
}

/** A server starts only where the bucket's Object Lock matches COFFER_S3_OBJECT_LOCK (docs/deploy.md#object-lock). */
async function checkObjectLock(config: Config, blobs: BlobStore): Promise<void> {
  if (config.blobStore !== 's3') return;
  const { S3BlobStore, objectLockProblem } = await import('../blobs/s3.js');
  if (!(blobs instanceof S3BlobStore)) return;
  const problem = objectLockProblem(config.s3.objectLock, config.s3.bucket!, await blobs.bucketObjectLock());
  if (problem !== null) throw new ConfigError(SERVER_SETTINGS.COFFER_S3_OBJECT_LOCK.name, problem);
}

/** Presigned transfers, where the operator turned them on (COFFER_S3_PRESIGNED=on, S3 store only). */
export async function openDirectTransfers(config: Config): Promise<DirectTransfers | undefined> {
  if (!config.s3.presigned) return undefined;
  const { S3Presigner } = await import('../blobs/s3-presign.js');
  return new S3Presigner({ ...s3Options(config), publicEndpoint: config.s3.publicEndpoint, lifetimeMs: config.s3.urlLifetimeMs });
}

/**
 * GETs presigned for the store's own endpoint (COFFER_S3_ENDPOINT), which nginx proxies: COFFER_ACCEL_REDIRECT with
 * the S3 store (docs/deploy.md#downloads-served-by-nginx).
 */
export async function openInternalTransfers(config: Config): Promise<DirectTransfers | undefined> {
  if (config.accelRedirect === null || config.blobStore !== 's3') return undefined;
  const { S3Presigner } = await import('../blobs/s3-presign.js');
  return new S3Presigner({ ...s3Options(config), publicEndpoint: null, lifetimeMs: config.s3.urlLifetimeMs });
}

type BackupServices = Pick<Services, 'vault' | 'retention' | 'quotas' | 'backups' | 'readPolicy' | 'attestations'>;

/**
 * The services of vaults and backups over their ports and backends, with the Config's limits: one construction for the
 * server and operator commands.
 */
function backupServices(
  config: Config,
  stores: Stores,
  blobs: BlobStore,
  bus: StatusBus,
  clock: Clock,
  presigners: { transfers?: DirectTransfers; internalTransfers?: DirectTransfers } = {},
): BackupServices {
  const retention = new RetentionService(stores, blobs, bus, clock);
  const quotas = new QuotaService(stores, clock, config.planQuotas, config.drillMaxAgeMs);
  const vault = new VaultService(stores, retention, clock);
  const backups = new BackupService(stores, blobs, bus, clock, quotas, retention, {
    maxArchiveBytes: config.maxArchiveBytes,
    uploadWindowMs: config.uploadWindowMs,
    ...presigners,
  });
  return {
    vault,
    retention,
    quotas,
    backups,
    readPolicy: new ReadPolicy(stores, backups),
    attestations: new AttestationService(stores, clock),
  };
}

/** The services of accounts, keys, sign-ins and the operator over their ports. */
function accountServices(config: Config, stores: Stores, clock: Clock): Pick<Services, 'audit' | 'keys' | 'sessions' | 'operator'> {
  const audit = new AuditTrail(stores, clock);
  const keys = new KeyService(stores, clock, audit, config.planQuotas);
  const sessions = new SessionService(stores, keys, clock, config.signInLimit);
  const operator = new OperatorService(stores, audit, sessions, clock, config.planQuotas);
  return { audit, keys, sessions, operator };
}

/** The shared setting where a starting server records its public URL. */
const PUBLIC_URL_SETTING = 'server.public_url';

export interface ComposeOptions {
  sweeper?: SweeperOptions;
  log?: (message: string, error?: unknown) => void;
}

export async function composeParts(config: Config, clock: Clock = systemClock, options: ComposeOptions = {}): Promise<Parts> {
  const blobs = await openBlobStore(config);
  await checkObjectLock(config, blobs);
  const uncached = await openStores(config);
  const transfers = await openDirectTransfers(config);
  let bus: StatusBus;
  let changes: ChangeFeed | undefined;
  if (config.databaseUrl !== null) {
    // Several nodes share the database: status changes travel between them on LISTEN/NOTIFY, and so do the
    // changes the metadata cache must hear of.
    const { PgStatusBus } = await import('../events/pg-bus.js');
    const pgBus = new PgStatusBus({ connectionString: config.databaseUrl, load: (id) => uncached.backups.getBackup(id), log: options.log });
    try {
      await pgBus.start();
    } catch (error) {
      await pgBus.close();
      await uncached.database.close();
      throw error;
    }
    bus = pgBus;
    changes = pgBus;
  } else {
    bus = new LocalStatusBus();
  }
  // Everything below reads and writes the cached ports through the cache, so every write of this process invalidates
  // it; the other ports change no cached row and are wired straight through.
  let cache: MetadataCache | undefined;
  let stores: Stores = uncached;
  if (config.metadataCache.maxBytes > 0) {
    const { cache: metadata, ...cached } = cachedPorts(uncached, {
      maxBytes: config.metadataCache.maxBytes,
      ...(changes ? { changes, ttlMs: config.metadataCache.ttlMs } : {}),
    });
    cache = metadata;
    stores = { ...uncached, ...cached };
  }
  const backupParts = backupServices(config, stores, blobs, bus, clock, {
    transfers,
    internalTransfers: await openInternalTransfers(config),
  });
  const { audit, keys, sessions, operator } = accountServices(config, stores, clock);
  // An upload may run as long as its slot is open: never take its parts or fresh blob for orphans before that
  // (config.orphanGraceMs: unless COFFER_ORPHAN_GRACE says otherwise, at least the upload window).
  const sweeper = new Sweeper(stores, blobs, backupParts.retention, backupParts.vault, sessions, {
    orphanGraceMs: config.orphanGraceMs,
    ...options.sweeper,
  });
  let blobHost: BlobHostService | undefined;
  let uploadHandshake: UploadHandshake | undefined;
  if (config.uploadProtocol === 'blobhost-client') {
    // Loaded only for this protocol (they bring TypeBox's validator): operator commands compose without them.
    const [{ BlobHostService, ReadWriteToken }, { UploadHandshake }] = await Promise.all([
      import('../services/blob-host.js'),
      import('../services/upload-handshake.js'),
    ]);
    const token = await ReadWriteToken.open(stores, clock);
    blobHost = new BlobHostService(blobs, stores, backupParts.backups, backupParts.quotas, clock, config, token);
    uploadHandshake = new UploadHandshake(blobs, backupParts.backups, clock, config, token);
  }
  let presignedUploads: PresignedUploadService | undefined;
  if (transfers) {
    const { PresignedUploadService } = await import('../services/presigned-upload.js');
    presignedUploads = new PresignedUploadService(blobs, transfers, stores, backupParts.backups, backupParts.quotas, clock, config);
  }
  return {
    config,
    clock,
    stores,
    cache,
    blobs,
    transfers,
    bus,
    ...backupParts,
    keys,
    audit,
    sessions,
    operator,
    sweeper,
    blobHost,
    uploadHandshake,
    presignedUploads,
    ...(changes ? { changeFeed: changes } : {}),
    async close() {
      await bus.close();
      await stores.database.close();
    },
  };
}

/**
 * The services of a one-shot operator command (`coffer admin …`) on the configured database, without the HTTP app:
 * no metadata cache and no LISTEN (its changes reach the servers' caches through the database's triggers), and a
 * status bus of its own. The blob store opens only for a command that needs it (`retention()`).
 */
export interface OperatorParts extends Pick<Services, 'config' | 'clock' | 'stores' | 'audit' | 'keys' | 'sessions' | 'operator'> {
  /** Deletion grace and retention (`coffer admin backups undelete`), over the blob store it opens. */
  retention(): Promise<RetentionService>;
  /**
   * The URL the server is reached at, for links: COFFER_PUBLIC_URL when this command has it, else the one the server
   * recorded at its last start (`recorded`), else the default derived from PORT (`recorded: false`).
   */
  publicUrl(): Promise<{ url: string; recorded: boolean }>;
  close(): Promise<void>;
}

export async function composeOperatorParts(config: Config, clock: Clock = systemClock): Promise<OperatorParts> {
  restrictFileModes(config); // a one-shot process: `coffer admin` may be the first to create the database
  const stores = await openStores(config);
  return {
    config,
    clock,
    stores,
    ...accountServices(config, stores, clock),
    retention: async () => new RetentionService(stores, await openBlobStore(config), new LocalStatusBus(), clock),
    async publicUrl() {
      if (config.publicUrlGiven) return { url: config.publicUrl, recorded: true };
      const recorded = await stores.settings.getSetting(PUBLIC_URL_SETTING);
      return recorded === undefined ? { url: config.publicUrl, recorded: false } : { url: recorded, recorded: true };
    },
    close: () => stores.database.close(),
  };
}

export interface Server extends CofferApp {
  parts: Parts;
  /** Base URL the server listens on (with the real port). */
  url: string;
  sweepOnce(): Promise<number>;
  stop(): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  logger?: FastifyServerOptions['logger'];
  sweeper?: SweeperOptions;
}

/** Starts everything: migrations, HTTP listener, background sweeper. */
export async function startServer(config: Config, options: StartOptions = {}): Promise<Server> {
  let log: (message: string, error?: unknown) => void = () => undefined;
  const parts = await composeParts(config, options.clock, {
    sweeper: options.sweeper,
    log: (message, error) => log(message, error),
  });
  // Loaded here, not at the top: operator commands compose their services without the HTTP app's modules.
  const { buildApp } = await import('./app.js');
  const coffer = await buildApp(parts, { logger: options.logger });
  log = (message, error) => coffer.app.log.warn({ err: error }, message);
  try {
    // Operator commands run where the server's settings may not be (`coffer admin login-link` in a plain shell): they
    // take the public URL from here (OperatorParts.publicUrl). The last node started wins; nodes share one URL anyway.
    await parts.stores.settings.putSetting(PUBLIC_URL_SETTING, config.publicUrl, parts.clock.now());
    await coffer.app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await coffer.app.close();
    await parts.close();
    throw error;
  }
  const address = coffer.app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;

  let sweeping: Promise<number> | null = null;
  const sweepOnce = () => {
    sweeping ??= parts.sweeper
      .runOnce()
      .then(
        (report) => {
          if (report.warning) coffer.app.log.warn(report.warning);
          coffer.metrics.sweeps.inc({ outcome: report.ran ? 'ok' : 'skipped' });
          return report.moved;
        },
        (error: unknown) => {
          coffer.metrics.sweeps.inc({ outcome: 'error' });
          throw error;
        },
      )
      .finally(() => {
        sweeping = null;
      });
    return sweeping;
  };
  const timer = setInterval(() => {
    sweepOnce().catch((error: unknown) => coffer.app.log.error({ err: error }, 'sweep failed'));
  }, config.sweepIntervalMs);
  timer.unref();
  void sweepOnce().catch((error: unknown) => coffer.app.log.error({ err: error }, 'sweep failed'));

  return {
    ...coffer,
    parts,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    sweepOnce,
    async stop() {
      clearInterval(timer);
      // close() drops idle keep-alive connections only once; a response still finishing at that moment
      // would keep its connection (and the shutdown) open until the keep-alive timeout.
      const dropIdle = setInterval(() => coffer.app.server.closeIdleConnections(), 100);
      try {
        await coffer.app.close();
      } finally {
        clearInterval(dropIdle);
      }
      await sweeping?.catch(() => 0);
      await parts.close();
    },
  };
}

function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Starts on a free port of `host`, with that port's URL as the public URL unless `configFor` says otherwise
 * (tests, benchmarks): the port is picked before anything is built, so the config is complete from the start.
 * A port another process takes in between is picked again.
 */
export async function startOnFreePort(
  configFor: (port: number, url: string) => Config,
  options: StartOptions = {},
  host = '127.0.0.1',
): Promise<Server> {
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort(host);
    try {
      return await startServer(configFor(port, `http://${host}:${port}`), options);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 5) throw error;
    }
  }
}
