/** The operator console's one-time links and sessions (the owner console's rules, src/services/sessions.ts; their own tables). */
import type { OperatorLink, OperatorSession } from '../../domain/entities.js';

export interface OperatorSessionStore {
  createOperatorLink(link: OperatorLink, tokenHash: string): Promise<void>;
  /** Like consumeLoginLink, for operator links: atomic, single use. */
  consumeOperatorLink(tokenHash: string, now: number): Promise<OperatorLink | undefined>;
  createOperatorSession(session: OperatorSession, tokenHash: string): Promise<void>;
  findOperatorSessionByHash(tokenHash: string): Promise<OperatorSession | undefined>;
  revokeOperatorSession(sessionId: string, at: number): Promise<boolean>;
}
