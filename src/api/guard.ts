/**
 * What the /api routes add to authentication for tamper resistance: the append-only check (the rule is
 * src/domain/append-only.ts) and the audit trail (src/services/audit.ts), both told who the caller is and from where.
 */
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import {
  APPEND_ONLY_REASON,
  APPEND_ONLY_RESOLUTION,
  appendOnlyDecision,
  needsVaultState,
  type GuardedAction,
} from '../domain/append-only.js';
import type { Actor, AuditAction } from '../domain/audit.js';
import { AppError } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import type { Principal } from '../http/auth.js';
import type { AuditTrail } from '../services/audit.js';
import type { VaultService } from '../services/vault.js';

/**
 * Who an authenticated request acts as: its console session, else its API key. A session names the API key it was
 * opened with (a session opened by a login link has none: its principal's keyId is `session:<id>`).
 */
export function actorOf(principal: Principal): Actor {
  if (principal.sessionId === undefined) return { kind: 'key', id: principal.keyId };
  const keyId = principal.keyId.startsWith('session:') ? null : principal.keyId;
  return { kind: 'session', id: principal.sessionId, keyId };
}

/** Records `action` for the request's account, actor and address. */
export type AuditRequest = (
  request: FastifyRequest,
  action: AuditAction,
  fields?: { target?: string | null; detail?: string | null; outcome?: 'done' | 'refused' },
) => Promise<void>;

export function auditRequests(audit: AuditTrail): AuditRequest {
  return async (request, action, fields = {}) => {
    const principal = request.principal;
    await audit.record({ accountId: principal.accountId, action, actor: actorOf(principal), address: request.ip, ...fields });
  };
}

/**
 * onRequest step after the scope check of the four operations an append-only key may not perform: refuses with
 * 403 insufficient_scope (`details.reason: "append_only"`) before any id is looked at or anything changes, and
 * records the attempt in the audit trail.
 */
export function appendOnlyGuard(vault: Pick<VaultService, 'accountView'>, audited: AuditRequest) {
  return function refuseAppendOnly(action: GuardedAction): onRequestAsyncHookHandler {
    return async function appendOnly(request) {
      const principal = request.principal;
      if (!principal.appendOnly) return;
      const vaultInitialized = needsVaultState(action) ? (await vault.accountView(principal.accountId)).vault !== undefined : true;
      const decision = appendOnlyDecision(action, principal, { vaultInitialized });
      if (decision.allowed) return;
      // The id in the path is the caller's text: only a well-formed one is worth keeping.
      const id = (request.params as { id?: unknown } | undefined)?.id;
      await audited(request, action, { outcome: 'refused', target: typeof id === 'string' && isUuid(id) ? id.toLowerCase() : null });
      throw new AppError('insufficient_scope', decision.message, { reason: APPEND_ONLY_REASON, action }, undefined, APPEND_ONLY_RESOLUTION);
    };
  };
}
