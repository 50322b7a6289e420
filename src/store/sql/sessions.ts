/** SessionStore on SQL: the owner console's one-time sign-in links and browser sessions, known by hash. */
import type { Kysely, Selectable } from 'kysely';
import type { LoginLink, Session } from '../../domain/entities.js';
import type { SessionStore } from '../ports/sessions.js';
import type { Database as Schema, LoginLinksTable, SessionsTable } from '../schema.js';
import type { SqlContext } from './context.js';
import { num, numOrNull } from './rows.js';

function toLoginLink(row: Selectable<LoginLinksTable>): LoginLink {
  return {
    id: row.id,
    accountId: row.account_id,
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    usedAt: numOrNull(row.used_at),
  };
}

function toSession(row: Selectable<SessionsTable>): Session {
  return {
    id: row.id,
    accountId: row.account_id,
    keyId: row.key_id,
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    revokedAt: numOrNull(row.revoked_at),
    freshAt: num(row.fresh_at ?? row.created_at),
  };
}

// ---- the sign-in rules both realms share (owners: login_links, sessions; the operator: operator_*) ----

/**
 * A link's single use: one conditional UPDATE, so of two concurrent uses (on any nodes) exactly one matches the
 * row; unknown, used or expired: undefined.
 */
export async function consumeLinkIn<T extends 'login_links' | 'operator_login_links'>(
  db: Kysely<Schema>,
  table: T,
  tokenHash: string,
  now: number,
): Promise<Selectable<Schema[T]> | undefined> {
  // The two tables share these columns; Kysely types one of them (the cast names the table's own row type back).
  const row = await db
    .updateTable(table as 'login_links')
    .set({ used_at: now })
    .where('token_hash', '=', tokenHash)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
  return row as Selectable<Schema[T]> | undefined;
}

export async function findSessionIn<T extends 'sessions' | 'operator_sessions'>(
  db: Kysely<Schema>,
  table: T,
  tokenHash: string,
): Promise<Selectable<Schema[T]> | undefined> {
  const row = await db
    .selectFrom(table as 'sessions')
    .selectAll()
    .where('token_hash', '=', tokenHash)
    .executeTakeFirst();
  return row as Selectable<Schema[T]> | undefined;
}

/** Revokes a live session once (a revoked one keeps its first revocation time); false: unknown or already revoked. */
export async function revokeSessionIn(
  db: Kysely<Schema>,
  table: 'sessions' | 'operator_sessions',
  sessionId: string,
  at: number,
): Promise<boolean> {
  const result = await db
    .updateTable(table as 'sessions')
    .set({ revoked_at: at })
    .where('id', '=', sessionId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export class SqlSessionStore implements SessionStore {
  constructor(private readonly ctx: SqlContext) {}

  async createLoginLink(link: LoginLink, tokenHash: string): Promise<void> {
    await this.ctx.db
      .insertInto('login_links')
      .values({
        id: link.id,
        account_id: link.accountId,
        token_hash: tokenHash,
        created_at: link.createdAt,
        expires_at: link.expiresAt,
        used_at: link.usedAt,
      })
      .execute();
  }

  async consumeLoginLink(tokenHash: string, now: number): Promise<LoginLink | undefined> {
    const row = await consumeLinkIn(this.ctx.db, 'login_links', tokenHash, now);
    return row && toLoginLink(row);
  }

  async createSession(session: Session, tokenHash: string): Promise<void> {
    await this.ctx.db
      .insertInto('sessions')
      .values({
        id: session.id,
        account_id: session.accountId,
        token_hash: tokenHash,
        key_id: session.keyId,
        created_at: session.createdAt,
        expires_at: session.expiresAt,
        revoked_at: session.revokedAt,
        fresh_at: session.freshAt,
      })
      .execute();
  }

  async findSessionByHash(tokenHash: string): Promise<Session | undefined> {
    const row = await findSessionIn(this.ctx.db, 'sessions', tokenHash);
    return row && toSession(row);
  }

  revokeSession(sessionId: string, at: number): Promise<boolean> {
    return revokeSessionIn(this.ctx.db, 'sessions', sessionId, at);
  }

  async pruneSessions(before: number): Promise<number> {
    const links = await this.ctx.db
      .deleteFrom('login_links')
      .where((eb) => eb.or([eb('expires_at', '<', before), eb('used_at', '<', before)]))
      .executeTakeFirst();
    const sessions = await this.ctx.db
      .deleteFrom('sessions')
      .where((eb) =>
        eb.or([
          eb('expires_at', '<', before),
          eb('revoked_at', '<', before),
          eb(
            'key_id',
            'in',
            eb
              .selectFrom('api_keys')
              .select('id')
              .where((keys) => keys.or([keys('revoked_at', '<', before), keys('expires_at', '<', before)])),
          ),
        ]),
      )
      .executeTakeFirst();
    const operatorLinks = await this.ctx.db
      .deleteFrom('operator_login_links')
      .where((eb) => eb.or([eb('expires_at', '<', before), eb('used_at', '<', before)]))
      .executeTakeFirst();
    const operatorSessions = await this.ctx.db
      .deleteFrom('operator_sessions')
      .where((eb) => eb.or([eb('expires_at', '<', before), eb('revoked_at', '<', before)]))
      .executeTakeFirst();
    return [links, sessions, operatorLinks, operatorSessions].reduce((sum, r) => sum + Number(r.numDeletedRows), 0);
  }
}
