/** What the console's route groups share: their options, the session guard, and small helpers. */
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import type { Clock } from '../domain/clock.js';
import type { BackupService } from '../services/backups.js';
import type { KeyService } from '../services/keys.js';
import type { SessionService } from '../services/sessions.js';
import type { Session } from '../store/store.js';

export interface ConsoleOptions {
  config: Config;
  sessions: SessionService;
  keys: KeyService;
  backups: BackupService;
  clock: Clock;
  /** Where dist/console-ui and dist/downloads are (default: this package). */
  root?: string;
}

export interface ConsoleContext extends ConsoleOptions {
  /** onRequest guard: a live session (cookie only), and the CSRF token on state-changing requests. */
  requireSession: (request: FastifyRequest) => Promise<void>;
}

declare module 'fastify' {
  interface FastifyRequest {
    consoleSession: Session;
    consoleSecret: string;
  }
}

export { iso, isoOrNull } from '../domain/time.js';

/** Not in /openapi.json: the console's endpoints are not part of the API that /openapi.json describes. */
export const hidden = { hide: true } as const;
