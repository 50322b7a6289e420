import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Scope } from '../domain/scopes.js';
import type { EventStreamHub } from './streams.js';
import type { Services } from '../services/services.js';
import type { Backup } from '../store/store.js';
import type { Metrics } from '../http/metrics.js';

/** What the /api routes use: three of the services, and what the app builds for them. */
export interface RouteContext extends Pick<Services, 'config' | 'backups' | 'uploadHandshake'> {
  streams: EventStreamHub;
  requireScope: (scope: Scope) => onRequestAsyncHookHandler;
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
