import type { Usage } from '../host-port';

/*
 * Usage across one run's model calls (docs/local-agent.md#usage): a call that reported usage counts once
 * (model_calls, turns[]), numeric fields are summed, other fields keep their first value. A call
 * without usage is unknown, never zero, so it is not counted.
 */
export class UsageTracker {
  private calls = 0;
  private readonly turns: Usage[] = [];
  private readonly totals: Record<string, unknown> = {};

  record(usage: Usage | null | undefined): void {
    if (!usage || typeof usage !== 'object' || Object.keys(usage).length === 0) {
      return;
    }
    this.calls += 1;
    this.turns.push(structuredClone(usage));
    for (const [k, v] of Object.entries(usage)) {
      if (typeof v === 'number' && Number.isFinite(v)) {
        const prev = this.totals[k];
        this.totals[k] = (typeof prev === 'number' ? prev : 0) + v;
      } else if (!(k in this.totals) && v !== null && v !== undefined) {
        this.totals[k] = structuredClone(v);
      }
    }
  }

  /** The aggregate, or undefined when no call reported usage. */
  snapshot(): Usage | undefined {
    if (this.calls === 0) {
      return undefined;
    }
    return { ...structuredClone(this.totals), model_calls: this.calls, turns: structuredClone(this.turns) };
  }
}

/** Total tokens of one call's usage for the compaction anchor (total, else prompt + completion). */
export function usageTotal(usage: Usage | null | undefined): number {
  if (!usage) {
    return 0;
  }
  if (typeof usage.total_tokens === 'number' && usage.total_tokens > 0) {
    return usage.total_tokens;
  }
  const sum = (usage.prompt_tokens ?? 0) + (usage.completion_tokens ?? 0);
  return sum > 0 ? sum : 0;
}
