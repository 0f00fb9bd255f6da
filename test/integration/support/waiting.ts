/**
 * Resolves true once `q` has not settled for `turns` timer turns of 20 ms: the call waits for
 * something (a lock, the connection gate). A negative check by nature (there is no signal of "still
 * waiting"): use it only where the test then releases what it waits for and checks the outcome.
 */
export async function stillWaiting(q: Promise<unknown>, turns = 3): Promise<boolean> {
  let settled = false;
  void q.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < turns; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  return !settled;
}
