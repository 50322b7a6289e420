/** Each account's audit trail. */
import type { AuditEntry } from '../../domain/audit.js';

export interface AuditStore {
  /**
   * Stores an audit entry, then drops the account's oldest entries with the same outcome beyond the newest `keep`
   * (one transaction): refused attempts never push out what was done.
   */
  appendAudit(entry: AuditEntry, keep: number): Promise<void>;
  /** The account's audit entries, newest first, at most `limit`. */
  listAudit(accountId: string, limit: number): Promise<AuditEntry[]>;
}
