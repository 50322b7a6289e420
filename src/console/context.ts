/** What the console's route groups share: the services they use, the session guard, and small helpers. */
import type { FastifyRequest } from 'fastify';
import type { Services } from '../services/services.js';
import type { Session } from '../domain/entities.js';

/** The services the console uses. */
export type ConsoleServices = Pick<
  Services,
  'config' | 'sessions' | 'keys' | 'vault' | 'retention' | 'quotas' | 'backups' | 'readPolicy' | 'clock' | 'audit'
>;

export interface ConsoleContext extends ConsoleServices {
  /** onRequest guard: a live session (cookie only), and the CSRF token on state-changing requests. */
  requireSession: (request: FastifyRequest) => Promise<void>;
}

declare module 'fastify' {
  interface FastifyRequest {
    consoleSession: Session;
    consoleSecret: string;
  }
}

/** Not in /openapi.json: the console's endpoints are not part of the API that /openapi.json describes. */
export const hidden = { hide: true } as const;
