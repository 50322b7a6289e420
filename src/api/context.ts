import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from '../config.js';
import type { Scope } from '../domain/scopes.js';
import type { EventStreamHub } from '../events/streams.js';
import type { BackupService } from '../services/backups.js';
import type { BlobHostService } from '../services/blob-host.js';
import type { Backup } from '../store/store.js';
import type { Metrics } from '../server/metrics.js';

export type App = FastifyInstance<
  import('node:http').Server,
  import('node:http').IncomingMessage,
  import('node:http').ServerResponse,
  import('fastify').FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export interface RouteContext {
  config: Config;
  backups: BackupService;
  streams: EventStreamHub;
  requireScope: (scope: Scope) => onRequestAsyncHookHandler;
  /** The blob host of the blobhost-client upload protocol; absent in direct mode. */
  blobHost?: BlobHostService;
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
