/**
 * The wait before retry number `attempt` (1 = the first retry): exponential from `baseMs`,
 * doubling, never above `maxMs`.
 */
export function backoffMs(attempt: number, baseMs: number, maxMs: number): number {
  const exp = Math.min(attempt - 1, 40); // 2^40 × base is past any cap
  return Math.min(maxMs, baseMs * 2 ** exp);
}
