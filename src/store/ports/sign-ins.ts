/** Console sign-in attempts, counted per address in fixed windows. */
export interface SignInStore {
  /**
   * Counts one console sign-in attempt from `address` in a fixed window of `windowMs` (a new window starts at `now`
   * when the last one has ended) and returns the attempts of the current window, this one included, and when that
   * window started. One atomic statement, so attempts on different nodes all count.
   */
  countSignInAttempt(address: string, now: number, windowMs: number): Promise<{ count: number; windowStart: number }>;
  /** Forgets the attempt windows that started before `before`; returns how many. */
  pruneSignInAttempts(before: number): Promise<number>;
}
