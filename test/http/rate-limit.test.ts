/** The in-memory limiter behind /mcp and the A2A endpoint: fixed windows per address, bounded memory. */
import { describe, expect, it } from 'vitest';
import { FixedWindowLimiter } from '../../src/http/rate-limit.js';

describe('FixedWindowLimiter', () => {
  it('allows max requests per window and address, then refuses until the window resets', () => {
    let now = 1_000_000;
    const limiter = new FixedWindowLimiter({ max: 3, windowMs: 10_000 }, () => now);
    expect([1, 2, 3].map(() => limiter.hit('a').allowed)).toEqual([true, true, true]);
    const refused = limiter.hit('a');
    expect(refused).toEqual({ allowed: false, remaining: 0, resetSeconds: 10 });
    expect(limiter.hit('b').allowed).toBe(true);
    now += 4_000;
    expect(limiter.hit('a').resetSeconds).toBe(6);
    now += 6_000;
    expect(limiter.hit('a')).toEqual({ allowed: true, remaining: 2, resetSeconds: 10 });
  });

  it('counts a cost of several requests at once (the messages of a JSON-RPC batch)', () => {
    const limiter = new FixedWindowLimiter({ max: 5, windowMs: 10_000 }, () => 0);
    expect(limiter.hit('a', 4)).toMatchObject({ allowed: true, remaining: 1 });
    expect(limiter.hit('a', 2)).toMatchObject({ allowed: false, remaining: 0 });
    expect(limiter.hit('b', 5).allowed).toBe(true);
  });

  it('never tracks more than maxKeys addresses', () => {
    let now = 0;
    const limiter = new FixedWindowLimiter({ max: 1, windowMs: 60_000, maxKeys: 100 }, () => now);
    for (let i = 0; i < 1_000; i++) {
      limiter.hit(`10.0.${i >> 8}.${i & 255}`);
      now += 1;
    }
    expect(limiter.size).toBeLessThanOrEqual(100);
  });
});
