/** /console/api/audit: the signed-in account's audit trail, newest first (owner only: the session's own account). */
import { AUDIT_MAX_ENTRIES, type AuditEntry } from '../domain/audit.js';
import { iso } from '../domain/time.js';
import type { AppPlugin } from '../http/fastify.js';
import type { Session } from '../domain/entities.js';
import { type ConsoleContext, hidden } from './context.js';
import { AuditList } from '../contract/console-schemas.js';

/** `labels`: the account's key labels by key id, so a key's actions and changes name it as its owner does. */
function auditBody(entry: AuditEntry, session: Session, labels: Map<string, string>) {
  const keyTarget = entry.action === 'key.create' || entry.action === 'key.revoke' ? entry.target : null;
  return {
    id: entry.id,
    at: iso(entry.at),
    action: entry.action,
    outcome: entry.outcome,
    actor: entry.actor,
    actorLabel: entry.actor.kind === 'key' && entry.actor.id !== null ? (labels.get(entry.actor.id) ?? null) : null,
    targetLabel: keyTarget !== null ? (labels.get(keyTarget) ?? null) : null,
    byThisSession: entry.actor.kind === 'session' && entry.actor.id === session.id,
    address: entry.address,
    target: entry.target,
    detail: entry.detail,
  };
}

export const auditRoutes: AppPlugin<ConsoleContext> = async (app, { audit, keys, requireSession }) => {
  app.get('/console/api/audit', { schema: { ...hidden, response: { 200: AuditList } }, onRequest: requireSession }, async (request) => {
    const session = request.consoleSession;
    const [events, accountKeys] = await Promise.all([audit.list(session.accountId), keys.list(session.accountId)]);
    const labels = new Map(accountKeys.flatMap((key) => (key.label ? [[key.id, key.label] as const] : [])));
    return { events: events.map((entry) => auditBody(entry, session, labels)), maxEntries: AUDIT_MAX_ENTRIES };
  });
};
