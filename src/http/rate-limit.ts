/** A small fixed-window request counter per client address, bounded in memory. */
export interface RateLimitOptions {
  /** Requests allowed per window and address. */
  max: number;
  windowMs: number;
  /** Addresses tracked at once; the oldest are forgotten beyond this. */
  maxKeys?: number;
}

export interface RateLimitResult {
  allowed: boolean;
  remaining: number;
  /** Whole seconds until the window resets. */
  resetSeconds: number;
}

export class FixedWindowLimiter {
  private readonly windows = new Map<string, { count: number; resetAt: number }>();
  private readonly maxKeys: number;

  constructor(
    readonly options: RateLimitOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.maxKeys = options.maxKeys ?? 10_000;
  }

  /** Counts `cost` requests (e.g. the messages of a JSON-RPC batch) for `key`. */
  hit(key: string, cost = 1): RateLimitResult {
    const now = this.now();
    let window = this.windows.get(key);
    if (!window || window.resetAt <= now) {
      this.windows.delete(key);
      this.evict(now);
      window = { count: 0, resetAt: now + this.options.windowMs };
      this.windows.set(key, window);
    }
    window.count += cost;
    return {
      allowed: window.count <= this.options.max,
      remaining: Math.max(0, this.options.max - window.count),
      resetSeconds: Math.max(1, Math.ceil((window.resetAt - now) / 1000)),
    };
  }

  get size(): number {
    return this.windows.size;
  }

  private evict(now: number): void {
    if (this.windows.size < this.maxKeys) return;
    for (const [key, window] of this.windows) {
      if (window.resetAt <= now) this.windows.delete(key);
    }
    // Still full: forget the oldest windows (Map keeps insertion order).
    for (const key of this.windows.keys()) {
      if (this.windows.size < this.maxKeys) break;
      this.windows.delete(key);
    }
  }
}
