/** Operator endpoints: /readyz (dependencies reachable) and /metrics (Prometheus). */
import { sameSecret } from '../lib/compare.js';
import type { AppPlugin } from '../http/fastify.js';
import type { BlobStore } from '../blobs/blob-store.js';
import { AppError } from '../domain/errors.js';
import type { Database } from '../store/ports/database.js';
import { errorBody } from '../contract/views.js';
import type { Metrics } from '../http/metrics.js';

const PROBE_TIMEOUT_MS = 2000;

async function probe(check: () => Promise<void>): Promise<'ok' | 'unreachable'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), PROBE_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(), timeout]);
    return 'ok';
  } catch {
    return 'unreachable';
  } finally {
    clearTimeout(timer);
  }
}

/** Compares the Authorization header with `Bearer <token>` in constant time. */
function bearerMatches(header: string | undefined, token: string): boolean {
  return sameSecret(header ?? '', `Bearer ${token}`);
}

export interface OperationsDeps {
  database: Database;
  blobs: BlobStore;
  metrics: Metrics;
  /** `/metrics` needs `Authorization: Bearer <metricsToken>`; without a token it is not served at all. */
  metricsToken: string | null;
}

export const operationsRoutes: AppPlugin<OperationsDeps> = async (app, deps) => {
  const { metrics } = deps;
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const [database, blobs] = await Promise.all([probe(() => deps.database.ping()), probe(() => deps.blobs.ping())]);
    const ready = database === 'ok' && blobs === 'ok';
    reply.code(ready ? 200 : 503).header('cache-control', 'no-store');
    return { status: ready ? 'ready' : 'unavailable', checks: { database, blobs } };
  });

  // Metrics reveal traffic and upload sizes (docs/operations.md#metrics): never public.
  const token = deps.metricsToken;
  if (token === null) return;
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    if (!bearerMatches(request.headers.authorization, token)) {
      const error = new AppError('authentication_required', 'GET /metrics needs the metrics token.');
      return reply
        .code(401)
        .header('www-authenticate', 'Bearer realm="metrics"')
        .send({ ...errorBody(error), resolution: 'Send "Authorization: Bearer <COFFER_METRICS_TOKEN>".' });
    }
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
};
