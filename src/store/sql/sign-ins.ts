/** SignInStore on SQL: console sign-in attempts, counted per address in fixed windows. */
import { sql } from 'kysely';
import type { SignInStore } from '../ports/sign-ins.js';
import type { SqlContext } from './context.js';
import { num } from './rows.js';

export class SqlSignInStore implements SignInStore {
  constructor(private readonly ctx: SqlContext) {}

  async countSignInAttempt(address: string, now: number, windowMs: number): Promise<{ count: number; windowStart: number }> {
    // One INSERT … ON CONFLICT DO UPDATE: the row is locked while it is counted, so concurrent attempts on any nodes
    // each add one. Both SET expressions read the row as it was (a window that ended restarts at 1, now).
    const ended = sql<boolean>`signin_attempts.window_start + ${windowMs} <= ${now}`;
    const row = await this.ctx.db
      .insertInto('signin_attempts')
      .values({ address, window_start: now, count: 1 })
      .onConflict((oc) =>
        oc.column('address').doUpdateSet({
          count: sql<number>`case when ${ended} then 1 else signin_attempts.count + 1 end`,
          window_start: sql<number>`case when ${ended} then ${now} else signin_attempts.window_start end`,
        }),
      )
      .returning(['count', 'window_start'])
      .executeTakeFirstOrThrow();
    return { count: num(row.count), windowStart: num(row.window_start) };
  }

  async pruneSignInAttempts(before: number): Promise<number> {
    const result = await this.ctx.db.deleteFrom('signin_attempts').where('window_start', '<', before).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
