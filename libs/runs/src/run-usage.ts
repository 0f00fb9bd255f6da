/**
 * A run's token usage (docs/delivery.md#usage, issue 10), from two independent sources: what the runner reported
 * on its terminal result, and what the host metered itself for every model call it proxied for
 * the run. Missing counts are unknown, never 0: `complete` is false when any is unknown.
 */
export interface TokenCounts {
  prompt_tokens: number | null;
  completion_tokens: number | null;
  total_tokens: number | null;
}

export interface MeteredCall {
  prompt_tokens: number | null;
  completion_tokens: number | null;
  total_tokens: number | null;
  complete: boolean;
}

export interface HostMetered extends TokenCounts {
  calls: number;
  complete: boolean;
}

/** The run record's `usage`: the runner's report (its provider-specific counters kept) and the host's metering. */
export type RunUsage = Record<string, unknown> &
  TokenCounts & {
    complete: boolean;
    host_metered?: HostMetered;
  };

const count = (v: unknown): number | null => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null);

export function runnerUsage(reported: Record<string, unknown> | null): RunUsage {
  const prompt = count(reported?.prompt_tokens);
  const completion = count(reported?.completion_tokens);
  const total = count(reported?.total_tokens) ?? (prompt !== null && completion !== null ? prompt + completion : null);
  return {
    ...(reported ?? {}),
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: total,
    complete: reported !== null && prompt !== null && completion !== null && total !== null,
  };
}

/** Sums of the host's metered calls; a sum is null (unknown) as soon as one call lacks it. */
export function hostMetered(calls: readonly MeteredCall[]): HostMetered {
  const sum = (k: keyof TokenCounts): number | null =>
    calls.reduce<number | null>((n, c) => (n === null || c[k] === null ? null : n + c[k]), 0);
  return {
    calls: calls.length,
    prompt_tokens: sum('prompt_tokens'),
    completion_tokens: sum('completion_tokens'),
    total_tokens: sum('total_tokens'),
    complete: calls.every((c) => c.complete && c.total_tokens !== null),
  };
}

export function runUsage(reported: Record<string, unknown> | null, metered?: readonly MeteredCall[]): RunUsage {
  const usage = runnerUsage(reported);
  return metered ? { ...usage, host_metered: hostMetered(metered) } : usage;
}
