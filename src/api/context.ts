import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { GuardedAction } from '../domain/append-only.js';
import type { Scope } from '../domain/scopes.js';
import type { AuditRequest } from './guard.js';
import type { EventStreamHub } from './streams.js';
import type { Services } from '../services/services.js';
import type { Backup } from '../domain/entities.js';
import type { Metrics } from '../http/metrics.js';

/** What the /api routes use: six of the services, and what the app builds for them. */
export interface RouteContext extends Pick<
  Services,
  'config' | 'vault' | 'backups' | 'readPolicy' | 'uploadHandshake' | 'presignedUploads'
> {
  streams: EventStreamHub;
  requireScope: (scope: Scope) => onRequestAsyncHookHandler;
  /** After requireScope: refuses an append-only key this action (src/api/guard.ts). */
  refuseAppendOnly: (action: GuardedAction) => onRequestAsyncHookHandler;
  /** Records an action of the request's caller in the account's audit trail. */
  audit: AuditRequest;
  metrics: Metrics;
  /** Whether the request's connection comes from a COFFER_TRUST_PROXY proxy (src/http/trusted-proxy.ts). */
  fromTrustedProxy: (request: FastifyRequest) => boolean;
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

/**
 * onRequest step for the read-only `/api/backups/{id}` routes (get, content, events): the caller's visible backup, or
 * one of its host accounts' for an owner credential (docs/api-rules.md#host-accounts); 404 for anything else.
 */
export function loadReadableBackup(ctx: RouteContext): onRequestAsyncHookHandler {
  return async function loadReadableBackup(request: FastifyRequest) {
    const { id } = request.params as { id: string };
    request.backup = await ctx.readPolicy.getReadable(request.principal, id);
  };
}
