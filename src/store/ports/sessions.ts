/** The owner console's one-time sign-in links and browser sessions, known by hash. */
import type { LoginLink, Session } from '../../domain/entities.js';

export interface SessionStore {
  createLoginLink(link: LoginLink, tokenHash: string): Promise<void>;
  /**
   * Uses a login link: marks it used when it is unused and unexpired at `now`, and returns it; undefined when it
   * is unknown, used or expired. Atomic, so two nodes never both accept one link.
   */
  consumeLoginLink(tokenHash: string, now: number): Promise<LoginLink | undefined>;
  createSession(session: Session, tokenHash: string): Promise<void>;
  findSessionByHash(tokenHash: string): Promise<Session | undefined>;
  /** Ends a session; false when it was unknown or already ended. */
  revokeSession(sessionId: string, at: number): Promise<boolean>;
  /**
   * Deletes login links that expired or were used before `before`, and sessions that expired or were signed out
   * before it or whose API key was revoked or expired before it; returns how many rows went.
   */
  pruneSessions(before: number): Promise<number>;
}
