/** Operator endpoints: /readyz (dependencies reachable) and /metrics (Prometheus), plus request metrics. */
import type { FastifyInstance } from 'fastify';
import type { BlobStore } from '../blobs/blob-store.js';
import type { Store } from '../store/store.js';
import type { Metrics } from './metrics.js';

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

export function operationsRoutes(app: FastifyInstance, deps: { store: Store; blobs: BlobStore; metrics: Metrics }): void {
  const { metrics } = deps;
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.requests.inc({ method: request.method, route, status: reply.statusCode });
    metrics.latency.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const [database, blobs] = await Promise.all([probe(() => deps.store.ping()), probe(() => deps.blobs.ping())]);
    const ready = database === 'ok' && blobs === 'ok';
    reply.code(ready ? 200 : 503).header('cache-control', 'no-store');
    return { status: ready ? 'ready' : 'unavailable', checks: { database, blobs } };
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.header('content-type', metrics.registry.contentType).header('cache-control', 'no-store');
    return metrics.registry.metrics();
  });
}
