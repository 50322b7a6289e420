/**
 * The Coffer console: a zero-knowledge web page for account owners, served by Coffer itself under /console.
 *
 * - /console, /console/*: the page (built by Vite into dist/console-ui; client-side routes fall back to index.html).
 * - /console/api/*: what the page needs beyond the API (sign-in, sign-out, overview, key management, the backups'
 *   wrapped data keys). Kept outside
 *   /api so the API surface stays exactly what /openapi.json describes. Only the session cookie is accepted here. Their bodies are
 *   the TypeBox schemas of src/contract/console-schemas.ts.
 * - /downloads/coffer-cli.tgz, /downloads/coffer-sdk.tgz: the CLI and SDK packages (`npm pack` output), so
 *   `npm install [-g] <that URL>` works against any Coffer server; /docs/sdk/: the SDK's reference (TypeDoc).
 *
 * The page talks to /api with the same session (the third credential of src/http/auth.ts). It downloads
 * ciphertext and decrypts it in the browser; passphrases and plaintext never reach the server.
 *
 * The routes are in session-routes.ts, overview-routes.ts, key-routes.ts, host-routes.ts, backup-key-routes.ts, retention-routes.ts,
 * audit-routes.ts and page-routes.ts.
 */
import type { FastifyRequest } from 'fastify';
import type { AppPlugin } from '../http/fastify.js';
import { AppError } from '../domain/errors.js';
import { jsonBodies } from '../http/bodies.js';
import type { ConsoleContext, ConsoleServices } from './context.js';
import { auditRoutes } from './audit-routes.js';
import { backupKeyRoutes } from './backup-key-routes.js';
import { hostRoutes } from './host-routes.js';
import { keyRoutes } from './key-routes.js';
import { overviewRoutes } from './overview-routes.js';
import { pageRoutes } from './page-routes.js';
import { retentionRoutes } from './retention-routes.js';
import { checkCsrf, sessionOf } from './session-http.js';
import { sessionRoutes } from './session-routes.js';

export const consoleRoutes: AppPlugin<ConsoleServices> = async (app, services) => {
  const { config, sessions, keys, vault, retention, quotas, backups, readPolicy, clock, audit } = services;
  jsonBodies(app);

  // Console API answers are private and never cached.
  app.addHook('onSend', async (request, reply) => {
    if (request.url.startsWith('/console/api/')) reply.header('cache-control', 'no-store');
  });

  // Set by requireSession; declared up front so every request has the same shape (Fastify's decorateRequest).
  app.decorateRequest('consoleSession');
  app.decorateRequest('consoleSecret');
  const requireSession = async (request: FastifyRequest) => {
    const context = await sessionOf(request, sessions, config);
    if (!context) throw new AppError('authentication_required', 'Sign in to the console first.');
    checkCsrf(request, config, sessions, context.secret);
    request.consoleSession = context.session;
    request.consoleSecret = context.secret;
  };

  const ctx: ConsoleContext = { config, sessions, keys, vault, retention, quotas, backups, readPolicy, clock, audit, requireSession };
  await app.register(sessionRoutes, ctx);
  await app.register(overviewRoutes, ctx);
  await app.register(keyRoutes, ctx);
  await app.register(hostRoutes, ctx);
  await app.register(backupKeyRoutes, ctx);
  await app.register(retentionRoutes, ctx);
  await app.register(auditRoutes, ctx);
  await app.register(pageRoutes, ctx);
};
