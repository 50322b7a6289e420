/** The composition root: turns a Config into running parts. The only place that picks implementations. */
import type { FastifyServerOptions } from 'fastify';
import type { Config } from '../config.js';
import type { BlobStore } from '../blobs/blob-store.js';
import { FsBlobStore } from '../blobs/fs.js';
import { type Clock, systemClock } from '../domain/clock.js';
import { LocalStatusBus, type StatusBus } from '../events/status-bus.js';
import { BackupService } from '../services/backups.js';
import { KeyService } from '../services/keys.js';
import { openSqliteStore } from '../store/sqlite.js';
import type { Store } from '../store/store.js';
import { type CofferApp, buildApp } from './app.js';

export interface Parts {
  config: Config;
  clock: Clock;
  store: Store;
  blobs: BlobStore;
  bus: StatusBus;
  backups: BackupService;
  keys: KeyService;
  close(): Promise<void>;
}

export async function openStore(config: Config): Promise<Store> {
  if (config.databaseUrl !== null) {
    throw new Error('COFFER_DATABASE_URL: PostgreSQL metadata is not available in this build yet');
  }
  const store = openSqliteStore(config.dataDir);
  await store.migrate();
  return store;
}

function openBlobStore(config: Config): BlobStore {
  if (config.blobStore === 's3') throw new Error('COFFER_BLOB_STORE=s3 is not available in this build yet');
  return new FsBlobStore(config.dataDir);
}

export async function composeParts(config: Config, clock: Clock = systemClock): Promise<Parts> {
  const store = await openStore(config);
  const blobs = openBlobStore(config);
  const bus = new LocalStatusBus();
  const backups = new BackupService(store, blobs, bus, clock, {
    maxArchiveBytes: config.maxArchiveBytes,
    uploadWindowMs: config.uploadWindowMs,
  });
  const keys = new KeyService(store, clock);
  return {
    config,
    clock,
    store,
    blobs,
    bus,
    backups,
    keys,
    async close() {
      await bus.close();
      await store.close();
    },
  };
}

export interface Server extends CofferApp {
  parts: Parts;
  /** Base URL the server listens on (with the real port). */
  url: string;
  sweepOnce(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts everything: migrations, HTTP listener, background sweeper. */
export async function startServer(
  config: Config,
  options: { clock?: Clock; logger?: FastifyServerOptions['logger'] } = {},
): Promise<Server> {
  const parts = await composeParts(config, options.clock);
  const coffer = await buildApp({ ...parts, logger: options.logger });
  await coffer.app.listen({ port: config.port, host: config.host });
  const address = coffer.app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;

  let sweeping: Promise<number> | null = null;
  const sweepOnce = () => {
    sweeping ??= parts.backups.sweep().finally(() => {
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
