import { Telemetry } from '@libs/telemetry';

/*
 * The CPU the metrics hooks add to one run, in process (node dist/bench/dispatch/telemetry-hooks.js):
 * the hook calls one echo run of this bench passes through (admission, dispatch, 5 deltas, a
 * message, the terminal result, an SSE reader, 4 writer groups, the end), with metrics off and
 * on, alternated; then one scrape. A same-process comparison, so the machine's load cancels out
 * far better than runs/s of two host processes does. Compare with the host CPU per run the
 * dispatch bench prints.
 */

const RUNNER = 'plugin:demo/echo/default';

function perRun(t: Telemetry, admittedAt: number): void {
  t.eventAdmitted('started', RUNNER);
  t.runDispatched(RUNNER, admittedAt);
  t.runFirstResult(RUNNER, admittedAt, 'run');
  for (let i = 0; i < 5; i++) {
    t.resultIngested('delta');
  }
  t.resultIngested('result');
  t.resultIngested('terminal');
  t.sseOpened();
  for (let i = 0; i < 4; i++) {
    t.writerGroup(16, t.now(), false);
  }
  t.runEnded(RUNNER, 'completed', admittedAt, 'run', null);
}

function nsPerRun(t: Telemetry, n: number): number {
  const now = Date.now();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    perRun(t, now);
  }
  return Number(process.hrtime.bigint() - t0) / n;
}

async function main(): Promise<void> {
  const off = new Telemetry();
  const on = new Telemetry();
  on.enableMetrics({ instance: 'bench' });
  for (let i = 0; i < 5; i++) {
    nsPerRun(off, 20_000);
    nsPerRun(on, 20_000);
  }
  const rounds: [number, number][] = [];
  for (let i = 0; i < 5; i++) {
    rounds.push([nsPerRun(off, 200_000), nsPerRun(on, 200_000)]);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const offNs = median(rounds.map((r) => r[0]));
  const onNs = median(rounds.map((r) => r[1]));
  const t0 = process.hrtime.bigint();
  const text = await on.metrics!.text();
  const scrapeMs = Number(process.hrtime.bigint() - t0) / 1e6;
  process.stdout.write(
    [
      '| metrics | ns per run (median of 5 × 200,000) |',
      '| ------- | ---------------------------------- |',
      `| off     | ${offNs.toFixed(0)} |`,
      `| on      | ${onNs.toFixed(0)} |`,
      '',
      `added by the hooks: ${((onNs - offNs) / 1000).toFixed(2)} µs per run; one scrape: ${scrapeMs.toFixed(1)} ms, ${text.length} bytes`,
      '',
    ].join('\n'),
  );
}

void main();
