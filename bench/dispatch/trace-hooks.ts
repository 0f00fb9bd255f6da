import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { telemetry, tracingRequested } from '@libs/telemetry';

/*
 * The CPU the tracing hooks add to one run, as a whole process (docs/benchmarks.md#observability-overhead):
 * `node dist/bench/dispatch/trace-hooks.js RUNS` makes the Tracing calls one echo run of the
 * dispatch bench makes in the host (admission and its writer commit, the run span, dispatch and
 * its traceparent, 7 results in two commit groups, first result, the end, a log line's trace id),
 * RUNS times. With OTEL_TRACES_EXPORTER=otlp the spans go through the host's real pipeline — the
 * sampler of OTEL_TRACES_SAMPLER(_ARG), the batch processor, the OTLP/HTTP JSON exporter — to a
 * sink in this process that drains each export and answers 200 (it does not parse them); without
 * it traces are off and every call returns at once. Time two such processes against each other
 * (same RUNS, traces on vs off) and divide the CPU difference by RUNS.
 */

const RUNNER = 'plugin:demo/echo/default';

async function oneRun(i: number): Promise<void> {
  const t = telemetry.tracing;
  const runId = `run-${i}`;
  await t.within(t.extract({}), () =>
    t.inSpan('admission', { 'runnerhost.agent_id': 'bench' }, async () => {
      await t.inSpan('writer commit', {}, () => Promise.resolve());
      t.runStarted(runId, { 'runnerhost.runner_id': RUNNER, 'runnerhost.agent_id': 'bench' });
    }),
  );
  t.runTraceparent(runId);
  t.runStep(runId, 'dispatch', () => undefined);
  for (let seq = 1; seq <= 7; seq++) {
    t.resultAccepted(runId, seq, seq <= 5);
    if (seq === 1) {
      t.runEvent(runId, 'first result');
    }
    if (seq === 3 || seq === 6) {
      t.resultsCommitted(runId, seq); // two commit groups before the terminal result
    }
  }
  t.runEnded(runId, 'completed', null);
  t.traceIdOf(runId);
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 20_000);
  let bytes = 0;
  let exports = 0;
  const sink = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      exports += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  if (tracingRequested()) {
    process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/v1/traces`;
    telemetry.tracing.start({ instance: 'bench' });
  }
  for (let i = 0; i < runs; i++) {
    await oneRun(i);
    if (i % 32 === 31) {
      // Let the batch processor's exports and the sink run, as the host's event loop would.
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
  }
  await telemetry.tracing.shutdown();
  sink.closeAllConnections();
  sink.close();
  process.stderr.write(
    `trace-hooks: ${runs} runs, traces ${telemetry.tracing.enabled ? `on (${process.env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on'} ${process.env.OTEL_TRACES_SAMPLER_ARG ?? ''})` : 'off'}, ${exports} exports, ${bytes} bytes\n`,
  );
}

void main();
