import type * as fc from 'fast-check';

/**
 * Fixed seed and bounded runs so `npm test` is repeatable and quick (~60 s per database);
 * `FUZZ_RUNS=2000 FUZZ_SEED=$RANDOM npm run test:e2e -- fuzz` for a long hunt.
 */
export const FUZZ_RUNS = Number(process.env.FUZZ_RUNS ?? 0) || 0;
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 20261201);

/** fast-check parameters: `defaultRuns` cases unless FUZZ_RUNS is set; no shrinking over the network. */
export function params<T>(defaultRuns: number): fc.Parameters<T> {
  return {
    seed: FUZZ_SEED,
    numRuns: FUZZ_RUNS > 0 ? FUZZ_RUNS : defaultRuns,
    // Shrinking replays requests against a host whose state has moved on: report the first failure.
    endOnFailure: true,
    verbose: 1,
  };
}
