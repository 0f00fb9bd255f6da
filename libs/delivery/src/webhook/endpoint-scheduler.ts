/**
 * Fair scheduling of webhook pushes across endpoints (docs/delivery.md, "Webhook fairness"):
 *
 * - at most `perEndpoint` runs of one endpoint (webhook URL) are pushed at once, so an endpoint
 *   that never answers can hold at most that many of the `concurrency` workers;
 * - free workers go round-robin over the endpoints with due work (the endpoint served longest
 *   ago first), so a busy endpoint cannot crowd out a quiet one;
 * - a circuit breaker per endpoint: after `breakerFailures` failed attempts in a row it opens and
 *   the endpoint gets no attempt at all (its ops wait in the outbox, holding no worker) until the
 *   open period ends; then one probe (half-open) decides: acknowledged → closed, failed → open
 *   again for twice as long, capped at `breakerMaxOpenMs`.
 *
 * This is in-memory bookkeeping only: which op is due, and the op order of a run, come from the
 * outbox; a restart forgets the breakers and simply probes again.
 */

export interface SchedulerOptions {
  /** Runs pushed at once over all endpoints (WEBHOOK_CONCURRENCY). */
  concurrency: number;
  /** Runs of one endpoint pushed at once (WEBHOOK_ENDPOINT_CONCURRENCY). */
  perEndpoint: number;
  /** Consecutive failed attempts that open an endpoint's breaker (WEBHOOK_BREAKER_FAILURES). */
  breakerFailures: number;
  /** First open period (WEBHOOK_BREAKER_OPEN_MS); doubles on every failed probe… */
  breakerOpenMs: number;
  /** …up to this (WEBHOOK_RETRY_MAX_MS). */
  breakerMaxOpenMs: number;
}

/** What the scheduler needs of a due head op: its run (one op of a run at a time) and endpoint. */
export interface Candidate {
  run_id: string;
  endpoint: string;
}

export type BreakerState = 'closed' | 'open' | 'half-open';

interface Endpoint {
  inflight: number;
  /** Failed attempts in a row (reset by an acknowledged one). */
  failures: number;
  state: BreakerState;
  /** While open: when the half-open probe may go. */
  openUntil: number;
  /** Open periods in a row (the next lasts breakerOpenMs × 2^(opens−1)). */
  opens: number;
  /** Round-robin order: the turn at which the endpoint last got a worker. */
  lastTurn: number;
}

export interface EndpointView {
  endpoint: string;
  state: BreakerState;
  inflight: number;
  failures: number;
  open_until: number | null;
}

export class EndpointScheduler {
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly runs = new Set<string>();
  private turn = 0;

  constructor(private readonly opts: SchedulerOptions) {}

  get inflight(): number {
    return this.runs.size;
  }

  isRunInflight(runId: string): boolean {
    return this.runs.has(runId);
  }

  /**
   * Picks, from due head ops (oldest first), the ones to start now and marks them in flight.
   * Each endpoint's candidates keep their order; endpoints take turns one op at a time.
   */
  pick<C extends Candidate>(candidates: readonly C[], now: number): C[] {
    const queues = new Map<string, C[]>();
    for (const c of candidates) {
      if (this.runs.has(c.run_id)) {
        continue;
      }
      const q = queues.get(c.endpoint);
      if (q) {
        q.push(c);
      } else {
        queues.set(c.endpoint, [c]);
      }
    }
    for (const [key, e] of this.endpoints) {
      if (!queues.has(key) && e.state === 'closed' && e.inflight === 0 && e.failures === 0) {
        this.endpoints.delete(key); // a healthy endpoint with nothing to send: nothing to remember
      }
    }
    const order = [...queues.keys()].sort((a, b) => this.endpoint(a).lastTurn - this.endpoint(b).lastTurn);
    const picked: C[] = [];
    let progress = true;
    while (progress && this.runs.size < this.opts.concurrency) {
      progress = false;
      for (const key of order) {
        if (this.runs.size >= this.opts.concurrency) {
          break;
        }
        const q = queues.get(key)!;
        const e = this.endpoint(key);
        if (q.length === 0 || !this.admits(e, now)) {
          continue;
        }
        const c = q.shift()!;
        if (this.runs.has(c.run_id)) {
          continue; // two heads of one run in one look: never (one head per run), but never twice
        }
        if (e.state === 'open') {
          e.state = 'half-open'; // this is the probe
        }
        e.inflight++;
        e.lastTurn = ++this.turn;
        this.runs.add(c.run_id);
        picked.push(c);
        progress = true;
      }
    }
    return picked;
  }

  /** An attempt of a run to `endpoint` ended; `ok` = acknowledged (2xx). */
  finished(runId: string, endpoint: string, ok: boolean, now: number): void {
    this.runs.delete(runId);
    const e = this.endpoint(endpoint);
    e.inflight = Math.max(0, e.inflight - 1);
    if (ok) {
      e.failures = 0;
      e.opens = 0;
      e.state = 'closed';
      e.openUntil = 0;
    } else {
      e.failures++;
      if (e.state === 'half-open' || (e.state === 'closed' && e.failures >= this.opts.breakerFailures)) {
        e.opens++;
        e.state = 'open';
        const period = this.opts.breakerOpenMs * 2 ** Math.min(e.opens - 1, 40);
        e.openUntil = now + Math.min(this.opts.breakerMaxOpenMs, period);
      }
    }
  }

  /**
   * A picked run sent nothing (another process holds its webhook lease, or its head op changed
   * since the look): its slot is freed and the breaker is left as it was — a probe that did not
   * go is due again at once.
   */
  skipped(runId: string, endpoint: string): void {
    this.runs.delete(runId);
    const e = this.endpoint(endpoint);
    e.inflight = Math.max(0, e.inflight - 1);
    if (e.state === 'half-open') {
      e.state = 'open';
    }
  }

  /**
   * The earliest time after `now` an open breaker lets its probe go (to wake the worker then), or
   * null. A period already over needs no wake-up: the endpoint's next due op, or the end of an
   * attempt still in flight, wakes the worker anyway.
   */
  nextProbeAt(now: number): number | null {
    let at: number | null = null;
    for (const e of this.endpoints.values()) {
      if (e.state === 'open' && e.openUntil > now && (at === null || e.openUntil < at)) {
        at = e.openUntil;
      }
    }
    return at;
  }

  /** Endpoints the scheduler currently remembers (busy, failing or open), for logs and tests. */
  view(): EndpointView[] {
    return [...this.endpoints].map(([endpoint, e]) => ({
      endpoint,
      state: e.state,
      inflight: e.inflight,
      failures: e.failures,
      open_until: e.state === 'open' ? e.openUntil : null,
    }));
  }

  private admits(e: Endpoint, now: number): boolean {
    switch (e.state) {
      case 'closed':
        return e.inflight < this.opts.perEndpoint;
      case 'open':
        return now >= e.openUntil && e.inflight === 0;
      case 'half-open':
        return false; // its probe is in flight
    }
  }

  private endpoint(key: string): Endpoint {
    let e = this.endpoints.get(key);
    if (!e) {
      e = { inflight: 0, failures: 0, state: 'closed', openUntil: 0, opens: 0, lastTurn: 0 };
      this.endpoints.set(key, e);
    }
    return e;
  }
}
