import type { Clock } from '../../src/domain/clock.js';

/** A clock that only moves when told to (tests of cadence, expiry and timeouts). */
export class ManualClock implements Clock {
  constructor(private current = Date.parse('2026-11-21T10:00:00.000Z')) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
}
