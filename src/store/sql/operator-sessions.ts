/** OperatorSessionStore on SQL: the operator console's one-time links and sessions (the owner console's rules). */
import type { Selectable } from 'kysely';
import type { OperatorLink, OperatorSession } from '../../domain/entities.js';
import type { OperatorSessionStore } from '../ports/operator-sessions.js';
import type { OperatorLoginLinksTable, OperatorSessionsTable } from '../schema.js';
import type { SqlContext } from './context.js';
import { num, numOrNull } from './rows.js';
import { consumeLinkIn, findSessionIn, revokeSessionIn } from './sessions.js';

export class SqlOperatorSessionStore implements OperatorSessionStore {
  constructor(private readonly ctx: SqlContext) {}

  async createOperatorLink(link: OperatorLink, tokenHash: string): Promise<void> {
    await this.ctx.db
      .insertInto('operator_login_links')
      .values({
        id: link.id,
        operator: link.operator,
        token_hash: tokenHash,
        created_at: link.createdAt,
        expires_at: link.expiresAt,
        used_at: link.usedAt,
      })
      .execute();
  }

  async consumeOperatorLink(tokenHash: string, now: number): Promise<OperatorLink | undefined> {
    const row: Selectable<OperatorLoginLinksTable> | undefined = await consumeLinkIn(this.ctx.db, 'operator_login_links', tokenHash, now);
    return (
      row && {
        id: row.id,
        operator: row.operator,
        createdAt: num(row.created_at),
        expiresAt: num(row.expires_at),
        usedAt: numOrNull(row.used_at),
      }
    );
  }

  async createOperatorSession(session: OperatorSession, tokenHash: string): Promise<void> {
    await this.ctx.db
      .insertInto('operator_sessions')
      .values({
        id: session.id,
        operator: session.operator,
        token_hash: tokenHash,
        created_at: session.createdAt,
        expires_at: session.expiresAt,
        revoked_at: session.revokedAt,
      })
      .execute();
  }

  async findOperatorSessionByHash(tokenHash: string): Promise<OperatorSession | undefined> {
    const row: Selectable<OperatorSessionsTable> | undefined = await findSessionIn(this.ctx.db, 'operator_sessions', tokenHash);
    return (
      row && {
        id: row.id,
        operator: row.operator,
        createdAt: num(row.created_at),
        expiresAt: num(row.expires_at),
        revokedAt: numOrNull(row.revoked_at),
      }
    );
  }

  revokeOperatorSession(sessionId: string, at: number): Promise<boolean> {
    return revokeSessionIn(this.ctx.db, 'operator_sessions', sessionId, at);
  }
}
