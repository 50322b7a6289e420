/** Prometheus metrics (prom-client): request rate and latency by route, upload bytes, event streams, sweeps. */
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { QueryCounts } from '../store/ports/database.js';

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

/** What the operator's aggregate gauges read at each scrape (docs/operations.md#metrics); never per account. */
export interface PlanUsage {
  accounts: number;
  hostAccounts: number;
  storedBytes: number;
  overdue: number;
  atQuota: number;
  /** Accounts with a restore drill recorded; of those, the stale ones and those whose newest drill reported failed. */
  drilledAccounts: number;
  staleDrillAccounts: number;
  failedDrillAccounts: number;
  /** Backups whose object is locked (S3 Object Lock), DELETED records still locked apart, and the bytes of both. */
  lockedBackups: number;
  lockedDeletedBackups: number;
  lockedBytes: number;
}

export interface OperatorStats {
  /**
   * Per plan (src/services/usage.ts): accounts (host accounts included, on their owner's plan), of those host accounts,
   * stored bytes, overdue accounts, and owners whose fleet (the owner and its host accounts) is at or over its quota.
   */
  usage(): Promise<Record<string, PlanUsage>>;
  /** Quota refusals since start, by where: create (409 quota_exceeded) or upload (413 upload_exceeds_quota). */
  quotaRefusals(): Record<'create' | 'upload', number>;
  /** Probes of the metadata database and the blob store (a rejection: unreachable). */
  probes: Record<'database' | 'blob_store', () => Promise<void>>;
  /** PostgreSQL: whether the change feed is connected; absent with SQLite (no feed). */
  changeFeedLive?: () => boolean;
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

  /** Failed probes of a dependency since start (a scrape probes both; see OperatorStats.probes). */
  readonly dependencyErrors = new Counter({
    name: 'coffer_dependency_errors_total',
    help: 'Failed probes of a dependency (database, blob_store): each scrape of /metrics probes both.',
    labelNames: ['dependency'] as const,
    registers: [this.registry],
  });

  constructor(streams: () => StreamStats, queryCounts: () => QueryCounts, cache?: () => CacheStats, operator?: OperatorStats) {
    if (operator) this.operatorMetrics(operator);
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

  /** The operator's gauges, computed from the database at each scrape (aggregates per plan, no account labels). */
  private operatorMetrics(operator: OperatorStats): void {
    const registers = [this.registry];
    // One usage query per scrape, shared by the three gauges that collect in the same scrape.
    let pending: Promise<Awaited<ReturnType<OperatorStats['usage']>>> | null = null;
    const usage = () => {
      pending ??= operator.usage().finally(() => setTimeout(() => (pending = null), 0));
      return pending;
    };
    const perPlan = (name: string, help: string, pick: (plan: PlanUsage) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['plan'] as const,
        registers,
        async collect() {
          const plans = await usage();
          this.reset();
          for (const [plan, totals] of Object.entries(plans)) this.set({ plan }, pick(totals));
        },
      });
    perPlan('coffer_accounts', 'Accounts (host accounts included), by plan.', (p) => p.accounts);
    perPlan('coffer_host_accounts', "Host accounts (counted in coffer_accounts too), by their owner's plan.", (p) => p.hostAccounts);
    perPlan(
      'coffer_fleets_at_quota',
      'Owner accounts whose fleet (the owner and its host accounts, which share its quota) stores at or over the quota, by plan.',
      (p) => p.atQuota,
    );
    perPlan(
      'coffer_stored_bytes',
      'Ciphertext stored (READY and UPLOADED backups, backups in their deletion grace, uploads in progress), by plan.',
      (p) => p.storedBytes,
    );
    perPlan('coffer_accounts_overdue', 'Accounts with no READY backup for more than twice their plan interval, by plan.', (p) => p.overdue);
    perPlan('coffer_drill_accounts', 'Accounts with at least one restore drill recorded, by plan.', (p) => p.drilledAccounts);
    perPlan(
      'coffer_drill_stale_accounts',
      'Drilled accounts whose newest restore drill is older than COFFER_DRILL_MAX_AGE, by plan.',
      (p) => p.staleDrillAccounts,
    );
    perPlan(
      'coffer_drill_failed_accounts',
      'Accounts whose newest restore drill reported failed (as the drill reported it: the server cannot check it), by plan.',
      (p) => p.failedDrillAccounts,
    );
    perPlan(
      'coffer_locked_backups',
      'Backups whose object the store keeps locked (S3 Object Lock), DELETED records still locked included, by plan.',
      (p) => p.lockedBackups + p.lockedDeletedBackups,
    );
    perPlan(
      'coffer_locked_bytes',
      'Ciphertext bytes of the locked objects counted by coffer_locked_backups, by plan.',
      (p) => p.lockedBytes,
    );
    new Counter({
      name: 'coffer_quota_refusals_total',
      help: 'Requests refused for the storage quota on this node, by where: create (409 quota_exceeded) or upload (413).',
      labelNames: ['where'] as const,
      registers,
      collect() {
        const refusals = operator.quotaRefusals();
        this.reset();
        this.inc({ where: 'create' }, refusals.create);
        this.inc({ where: 'upload' }, refusals.upload);
      },
    });
    const errors = this.dependencyErrors;
    for (const dependency of ['database', 'blob_store'] as const) errors.inc({ dependency }, 0);
    new Gauge({
      name: 'coffer_dependency_up',
      help: 'Whether a dependency (database, blob_store) answered its probe at this scrape (1) or not (0).',
      labelNames: ['dependency'] as const,
      registers,
      async collect() {
        const results = await Promise.all(
          (['database', 'blob_store'] as const).map(
            async (dependency) => [dependency, await reachable(operator.probes[dependency])] as const,
          ),
        );
        for (const [dependency, up] of results) {
          this.set({ dependency }, up ? 1 : 0);
          if (!up) errors.inc({ dependency });
        }
      },
    });
    const live = operator.changeFeedLive;
    if (live) {
      new Gauge({
        name: 'coffer_change_feed_connected',
        help: "PostgreSQL: whether this node's change feed (LISTEN, for the metadata cache and events) is connected.",
        registers,
        collect() {
          this.set(live() ? 1 : 0);
        },
      });
    }
  }
}

const PROBE_TIMEOUT_MS = 2000;

async function reachable(probe: () => Promise<void>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([probe(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), PROBE_TIMEOUT_MS)))]);
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** Counts every answered request and its latency, by method, route template and status. */
export function requestMetrics(app: FastifyInstance, metrics: Metrics): void {
  // Synchronous: no promise and no microtask per request (bench P3).
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.requests.inc({ method: request.method, route, status: reply.statusCode });
    metrics.latency.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    done();
  });
}
