/** /console/api/audit: the signed-in account's audit trail, newest first (owner only: the session's own account). */
import { AUDIT_MAX_ENTRIES, type AuditEntry } from '../domain/audit.js';
import { iso } from '../domain/time.js';
import type { App } from '../http/fastify.js';
import type { Session } from '../store/store.js';
import { type ConsoleContext, hidden } from './context.js';
import { AuditList } from './schemas.js';

function auditBody(entry: AuditEntry, session: Session) {
  return {
    id: entry.id,
    at: iso(entry.at),
    action: entry.action,
    outcome: entry.outcome,
    actor: entry.actor,
    byThisSession: entry.actor.kind === 'session' && entry.actor.id === session.id,
    address: entry.address,
    target: entry.target,
    detail: entry.detail,
  };
}

export function auditRoutes(app: App, { audit, requireSession }: ConsoleContext): void {
  app.get('/console/api/audit', { schema: { ...hidden, response: { 200: AuditList } }, onRequest: requireSession }, async (request) => {
    const session = request.consoleSession;
    const events = await audit.list(session.accountId);
    return { events: events.map((entry) => auditBody(entry, session)), maxEntries: AUDIT_MAX_ENTRIES };
  });
}
