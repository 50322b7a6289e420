/**
 * The audit trail (docs/operations.md#audit-trail): one call records who did what to an account, from where.
 * Every destructive or key-changing action calls `record` once it is done (or refused); the console shows the
 * account's own entries. The trail never holds secrets: entries are checked by the domain rule before they are stored.
 */
import { v7 as uuidv7 } from 'uuid';
import {
  AUDIT_MAX_ENTRIES,
  auditEntryProblems,
  type AuditAction,
  type AuditActor,
  type AuditEntry,
  type AuditOutcome,
} from '../domain/audit.js';
import type { Clock } from '../domain/clock.js';
import type { Stores } from '../store/ports/stores.js';

export interface AuditRecord {
  accountId: string;
  action: AuditAction;
  actor: AuditActor;
  /** The client address (request.ip); null for an operator at the database. */
  address: string | null;
  /** A backup id, a key id; null or absent when the account itself is the target. */
  target?: string | null;
  /** A short plain note (no secrets): "free → plus", "3 backups deleted". */
  detail?: string | null;
  /** Default `done`; `refused` for an attempt that was refused and changed nothing. */
  outcome?: AuditOutcome;
}

/** The actor of an operator command: the OS user that ran `coffer admin`, when it can be told. */
export function operatorActor(user: string | undefined): AuditActor {
  return { kind: 'operator', id: user && user.length <= 100 ? user : null };
}

export class AuditTrail {
  constructor(
    private readonly ports: Pick<Stores, 'audit'>,
    private readonly clock: Clock,
    private readonly keep = AUDIT_MAX_ENTRIES,
  ) {}

  /** Stores one entry (dropping the account's oldest of its outcome beyond the bound). Throws when it would hold a secret. */
  async record(input: AuditRecord): Promise<AuditEntry> {
    const entry: AuditEntry = {
      id: uuidv7(),
      accountId: input.accountId,
      at: this.clock.now(),
      action: input.action,
      outcome: input.outcome ?? 'done',
      actor: { kind: input.actor.kind, id: input.actor.id },
      address: input.address,
      target: input.target ?? null,
      detail: input.detail ?? null,
    };
    const problems = auditEntryProblems(entry);
    if (problems.length > 0) throw new Error(`refusing to record an audit entry: ${problems.join('; ')}`);
    await this.ports.audit.appendAudit(entry, this.keep);
    return entry;
  }

  /** The account's entries, newest first (everything kept: at most the bound per outcome). */
  list(accountId: string, limit = 2 * AUDIT_MAX_ENTRIES): Promise<AuditEntry[]> {
    return this.ports.audit.listAudit(accountId, Math.max(1, Math.min(limit, 2 * AUDIT_MAX_ENTRIES)));
  }
}
