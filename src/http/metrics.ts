/** Prometheus metrics (prom-client): request rate and latency by route, upload bytes, event streams, sweeps. */
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { QueryCounts } from '../store/store.js';

/** What the event streams report (src/api/streams.ts): open now, and refused since start by the cap reached. */
export interface StreamStats {
  open: number;
  refused: Record<'account' | 'address', number>;
}

/** What the metadata cache reports (src/store/cached-store.ts). */
export interface CacheStats {
  hits: number;
  misses: number;
  bytes: number;
}

export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'coffer_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'coffer_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method and route template.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60],
    registers: [this.registry],
  });
  readonly uploadBytes = new Counter({
    name: 'coffer_upload_bytes_total',
    help: 'Ciphertext bytes stored by completed uploads.',
    registers: [this.registry],
  });
  readonly sweeps = new Counter({
    name: 'coffer_sweeper_runs_total',
    help: 'Sweeper runs, by outcome (ok, error, skipped when another node holds the lock).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  constructor(streams: () => StreamStats, queryCounts: () => QueryCounts, cache?: () => CacheStats) {
    if (cache) {
      new Counter({
        name: 'coffer_metadata_cache_lookups_total',
        help: 'Reads of the metadata cache (API keys, accounts, vaults, lists), by result: hit or miss (read from the database).',
        labelNames: ['result'] as const,
        registers: [this.registry],
        collect() {
          const { hits, misses } = cache();
          this.reset();
          this.inc({ result: 'hit' }, hits);
          this.inc({ result: 'miss' }, misses);
        },
      });
      new Gauge({
        name: 'coffer_metadata_cache_bytes',
        help: 'Estimated size of what the metadata cache holds (bounded by COFFER_METADATA_CACHE_MB).',
        registers: [this.registry],
        collect() {
          this.set(cache().bytes);
        },
      });
    }
    new Counter({
      name: 'coffer_db_queries_total',
      help: 'Statements sent to the metadata database, by kind.',
      labelNames: ['kind'] as const,
      registers: [this.registry],
      collect() {
        const counts = queryCounts();
        this.reset();
        this.inc({ kind: 'read' }, counts.reads);
        this.inc({ kind: 'write' }, counts.writes);
        this.inc({ kind: 'other' }, counts.other);
      },
    });
    new Gauge({
      name: 'coffer_event_streams_open',
      help: 'Event streams currently open on this node.',
      registers: [this.registry],
      collect() {
        this.set(streams().open);
      },
    });
    new Counter({
      name: 'coffer_event_streams_refused_total',
      help: 'Event streams refused with too_many_streams, by the cap that was reached (account or address).',
      labelNames: ['limit'] as const,
      registers: [this.registry],
      collect() {
        const { refused } = streams();
        this.reset();
        this.inc({ limit: 'account' }, refused.account);
        this.inc({ limit: 'address' }, refused.address);
      },
    });
    collectDefaultMetrics({ register: this.registry, prefix: 'coffer_' });
  }
}

/** Counts every answered request and its latency, by method, route template and status. */
export function requestMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.requests.inc({ method: request.method, route, status: reply.statusCode });
    metrics.latency.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });
}
