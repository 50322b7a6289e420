/**
 * One timer for many periodic members: one `setInterval` per hub, not a `setInterval` and a `setTimeout` per open
 * event stream, whose cost to the event loop would grow with the open streams (P4 in BENCHMARKS.md). The period
 * is cut into `slots` ticks; a member joins the slot of the tick that fired last, so it is visited every `slots`
 * ticks, at most one period after it joined (never later than a timer of its own would have fired, less the event
 * loop's own delay, which both share). The visits of members that joined at different moments stay spread over
 * the period, as their own timers were.
 *
 * The timer runs only while there are members; `onTick` runs at every tick before the slot is visited (the
 * owner uses it for deadlines). A member may leave at any time, also from inside a visit.
 */
export class HeartbeatWheel<T> {
  private readonly slots: Set<T>[];
  /** The slot the next tick visits. */
  private cursor = 0;
  private timer: NodeJS.Timeout | null = null;
  private count = 0;
  readonly tickMs: number;

  constructor(
    periodMs: number,
    private readonly visit: (member: T) => void,
    private readonly onTick: () => void = () => undefined,
    maxSlots = 20,
  ) {
    // Ticks of at least ~10 ms: a short period gets fewer slots rather than a busier timer.
    const slots = Math.max(1, Math.min(maxSlots, Math.floor(periodMs / 10)));
    this.slots = Array.from({ length: slots }, () => new Set<T>());
    this.tickMs = Math.max(1, Math.floor(periodMs / slots));
  }

  add(member: T): void {
    const lastFired = (this.cursor + this.slots.length - 1) % this.slots.length;
    this.slots[lastFired]!.add(member);
    this.count += 1;
    this.timer ??= setInterval(() => this.tick(), this.tickMs);
  }

  delete(member: T): boolean {
    for (const slot of this.slots) {
      if (slot.delete(member)) {
        this.count -= 1;
        if (this.count === 0) this.stop();
        return true;
      }
    }
    return false;
  }

  /** Members on the wheel (each is in exactly one slot). */
  get size(): number {
    return this.count;
  }

  /** Whether the shared timer is running (it stops when the last member leaves). */
  get running(): boolean {
    return this.timer !== null;
  }

  private tick(): void {
    this.onTick();
    const slot = this.slots[this.cursor]!;
    this.cursor = (this.cursor + 1) % this.slots.length;
    // Deleting the visited member (or another) during the walk is safe: a Set iterator skips removed entries.
    for (const member of slot) this.visit(member);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
