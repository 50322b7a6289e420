/**
 * Everything the composition root (src/server/compose.ts) builds once for a Config. The app and its route plugins
 * take it whole or as much of it as they use (a Pick<Services, …>); nothing else assembles these parts.
 */
import type { BlobStore, DirectTransfers } from '../blobs/blob-store.js';
import type { Config } from '../config.js';
import type { Clock } from '../domain/clock.js';
import type { StatusBus } from '../events/status-bus.js';
import type { Stores } from '../store/ports/stores.js';
import type { AttestationService } from './attestations.js';
import type { AuditTrail } from './audit.js';
import type { BackupService } from './backups.js';
import type { BlobHostService } from './blob-host.js';
import type { KeyService } from './keys.js';
import type { OperatorService } from './operator.js';
import type { PresignedUploadService } from './presigned-upload.js';
import type { QuotaService } from './quotas.js';
import type { ReadPolicy } from './read-policy.js';
import type { RetentionService } from './retention.js';
import type { SessionService } from './sessions.js';
import type { Sweeper } from './sweeper.js';
import type { UploadHandshake } from './upload-handshake.js';
import type { VaultService } from './vault.js';

export interface Services {
  config: Config;
  clock: Clock;
  /** Every persistence port (src/store/ports/). */
  stores: Stores;
  /** The metadata cache the cached ports read through (absent with COFFER_METADATA_CACHE_MB=0): its counters for /metrics. */
  cache?: MetadataCacheCounters;
  blobs: BlobStore;
  /** Presigned requests straight to the object store (COFFER_S3_PRESIGNED=on); absent: every byte goes through Coffer. */
  transfers?: DirectTransfers;
  bus: StatusBus;
  /** The vault's life: bootstrap, rotate, reset, the history of replaced envelopes. */
  vault: VaultService;
  /** Deletion grace and retention: deleting, scheduled deletes (undelete, purge), the grace, the sweep. */
  retention: RetentionService;
  /** Quotas and usage: what a fleet stores against its quota, reservations, refusals. */
  quotas: QuotaService;
  /** The backup's life: create, upload, finalize, content, delete. */
  backups: BackupService;
  /** Who may read which backups: the caller's own, and an owner its host accounts'. */
  readPolicy: ReadPolicy;
  /** Restore attestations: what drills reported, per backup, for whoever may read the backup. */
  attestations: AttestationService;
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
  /** COFFER_S3_PRESIGNED=on (S3 store): the `s3-presigned` negotiation of POST /api/backups/upload. */
  presignedUploads?: PresignedUploadService;
  /** PostgreSQL: the change feed the metadata cache and other nodes' events arrive on (live: its LISTEN is up). */
  changeFeed?: { readonly live: boolean };
}

/** What the metadata cache (src/store/cached-store.ts) reports for /metrics. */
export interface MetadataCacheCounters {
  readonly stats: { hits: number; misses: number; clears: number };
  readonly size: { entries: number; bytes: number };
}
