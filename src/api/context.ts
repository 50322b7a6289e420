import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Config } from '../config.js';
import type { Scope } from '../domain/scopes.js';
import type { EventStreamHub } from './streams.js';
import type { BackupService } from '../services/backups.js';
import type { UploadHandshake } from '../services/upload-handshake.js';
import type { Backup } from '../store/store.js';
import type { Metrics } from '../http/metrics.js';

export interface RouteContext {
  config: Config;
  backups: BackupService;
  streams: EventStreamHub;
  requireScope: (scope: Scope) => onRequestAsyncHookHandler;
  /** The handshake of the blobhost-client upload protocol; absent in direct mode. */
  uploadHandshake?: UploadHandshake;
  metrics: Metrics;
}

declare module 'fastify' {
  interface FastifyRequest {
    backup: Backup;
  }
}

/** onRequest step for `/api/backups/{id}` routes: the caller's visible backup, or 404 for anything else. */
export function loadBackup(ctx: RouteContext): onRequestAsyncHookHandler {
  return async function loadBackup(request: FastifyRequest) {
    const { id } = request.params as { id: string };
    request.backup = await ctx.backups.getVisible(request.principal.accountId, id);
  };
}
