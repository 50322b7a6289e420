/**
 * Everything the composition root (src/server/compose.ts) builds once for a Config. The app and its route plugins
 * take it whole or as much of it as they use (a Pick<Services, …>); nothing else assembles these parts.
 */
import type { BlobStore } from '../blobs/blob-store.js';
import type { Config } from '../config.js';
import type { Clock } from '../domain/clock.js';
import type { StatusBus } from '../events/status-bus.js';
import type { CachedStore } from '../store/cached-store.js';
import type { Stores } from '../store/ports/stores.js';
import type { AuditTrail } from './audit.js';
import type { BackupService } from './backups.js';
import type { BlobHostService } from './blob-host.js';
import type { KeyService } from './keys.js';
import type { OperatorService } from './operator.js';
import type { SessionService } from './sessions.js';
import type { Sweeper } from './sweeper.js';
import type { UploadHandshake } from './upload-handshake.js';

export interface Services {
  config: Config;
  clock: Clock;
  /** Every persistence port (src/store/ports/). */
  stores: Stores;
  /** The metadata cache the cached ports read through (absent with COFFER_METADATA_CACHE_MB=0): its counters for /metrics. */
  cache?: CachedStore;
  blobs: BlobStore;
  bus: StatusBus;
  backups: BackupService;
  keys: KeyService;
  /** The per-account audit trail of destructive and key-changing actions. */
  audit: AuditTrail;
  /** Console sign-in links and browser sessions: the console, and the third credential of every API operation. */
  sessions: SessionService;
  /** The operator's view and changes (the operator console at /admin, `coffer admin`): counts, bytes, times. */
  operator: OperatorService;
  sweeper: Sweeper;
  /** COFFER_UPLOAD_PROTOCOL=blobhost-client only: the /blob host and the handshake of POST /api/backups/upload. */
  blobHost?: BlobHostService;
  uploadHandshake?: UploadHandshake;
  /** PostgreSQL: the change feed the metadata cache and other nodes' events arrive on (live: its LISTEN is up). */
  changeFeed?: { readonly live: boolean };
}
