/** A token bucket: `rate` tokens per second, at most `burst` saved up. */
export class TokenBucket {
  private tokens: number;
  private last = Date.now();

  constructor(
    private readonly rate: number,
    private readonly burst: number,
  ) {
    this.tokens = burst;
  }

  take(now = Date.now()): boolean {
    this.refill(now);
    if (this.tokens < 1) {
      return false;
    }
    this.tokens -= 1;
    return true;
  }

  /**
   * Takes a token now or reserves the next free one: answers how many milliseconds the caller
   * waits before its call may go (0: at once). Callers that wait are paced at `rate` per second
   * in the order they asked; `take` refuses until the reservations are paid back.
   */
  reserve(now = Date.now()): number {
    this.refill(now);
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.rate) * 1000);
  }

  /** Whole tokens available now. */
  available(now = Date.now()): number {
    this.refill(now);
    return Math.max(0, Math.floor(this.tokens));
  }

  private refill(now: number): void {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
  }
}
