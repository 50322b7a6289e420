/** AuditStore on SQL: each account's audit trail, bounded per outcome. */
import type { Selectable } from 'kysely';
import type { ActorKind, AuditAction, AuditEntry, AuditOutcome } from '../../domain/audit.js';
import type { AuditStore } from '../ports/audit.js';
import type { AuditEventsTable } from '../schema.js';
import type { SqlContext } from './context.js';
import { num } from './rows.js';

function toAuditEntry(row: Selectable<AuditEventsTable>): AuditEntry {
  return {
    id: row.id,
    accountId: row.account_id,
    at: num(row.at),
    action: row.action as AuditAction,
    outcome: row.outcome as AuditOutcome,
    actor: { kind: row.actor_kind as ActorKind, id: row.actor_id },
    address: row.address,
    target: row.target,
    detail: row.detail,
  };
}

export class SqlAuditStore implements AuditStore {
  constructor(private readonly ctx: SqlContext) {}

  async appendAudit(entry: AuditEntry, keep: number): Promise<void> {
    await this.ctx.transaction(async (trx) => {
      await trx
        .insertInto('audit_events')
        .values({
          id: entry.id,
          account_id: entry.accountId,
          at: entry.at,
          action: entry.action,
          outcome: entry.outcome,
          actor_kind: entry.actor.kind,
          actor_id: entry.actor.id,
          address: entry.address,
          target: entry.target,
          detail: entry.detail,
        })
        .execute();
      // The bound: of this account's entries with the same outcome, everything older than the newest `keep` goes.
      // The oldest entry to drop is found on the (account_id, at, id) index, an index walk, not a scan.
      const oldestDropped = await trx
        .selectFrom('audit_events')
        .select(['at', 'id'])
        .where('account_id', '=', entry.accountId)
        .where('outcome', '=', entry.outcome)
        .orderBy('at', 'desc')
        .orderBy('id', 'desc')
        .limit(1)
        .offset(keep)
        .executeTakeFirst();
      if (oldestDropped) {
        const at = num(oldestDropped.at);
        await trx
          .deleteFrom('audit_events')
          .where('account_id', '=', entry.accountId)
          .where('outcome', '=', entry.outcome)
          .where((eb) => eb.or([eb('at', '<', at), eb.and([eb('at', '=', at), eb('id', '<=', oldestDropped.id)])]))
          .execute();
      }
    });
  }

  async listAudit(accountId: string, limit: number): Promise<AuditEntry[]> {
    const rows = await this.ctx.db
      .selectFrom('audit_events')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toAuditEntry);
  }
}
