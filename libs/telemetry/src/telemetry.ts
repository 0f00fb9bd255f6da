import { performance } from 'node:perf_hooks';
import { HostMetrics, type MetricsOptions, type SampleName, type SignalBusCounts } from './metrics';
import { LogLevels } from './log-levels';
import { Tracing } from './tracing';

/** Result kinds counted apart: deltas are most of the traffic. */
export type ResultKind = 'delta' | 'result' | 'terminal';

/**
 * The one telemetry entry point of a host process. Services call these methods where they own
 * the fact (one line each); until `enableMetrics` runs (at boot, when METRICS is on) every call
 * is a no-op, so unit tests and tools that build services alone need nothing.
 */
export class Telemetry {
  private m: HostMetrics | null = null;
  /** Traces (off unless started; see tracing.ts). */
  readonly tracing = new Tracing();
  /** Whether the process's logger writes a level (see log-levels.ts). */
  readonly logs = new LogLevels();

  /** Creates the process's registry (once; a second call returns the same one). */
  enableMetrics(opts: MetricsOptions): HostMetrics {
    this.m ??= new HostMetrics(opts);
    return this.m;
  }

  get metrics(): HostMetrics | null {
    return this.m;
  }

  /** A monotonic clock in milliseconds for the `*Ms` arguments below. */
  now(): number {
    return performance.now();
  }

  /** A gauge read at scrape time (see SampleName). */
  sample(name: SampleName, read: () => number | null | Promise<number | null>): void {
    this.m?.sample(name, read);
  }

  /** The signal bus's counters, read at scrape time; `bus` is its kind (memory, postgres, nats). */
  signalBus(bus: string, read: () => SignalBusCounts): void {
    this.m?.signalBus(bus, read);
  }

  eventAdmitted(disposition: string, runnerId: string): void {
    this.m?.runsAdmitted.get(disposition, runnerId).inc();
  }

  /** `admittedAt`: the run's admission time (epoch ms). */
  runDispatched(runnerId: string, admittedAt: number): void {
    this.m?.admissionToDispatch.get(runnerId).observe(secondsSince(admittedAt));
  }

  runFirstResult(runnerId: string, admittedAt: number, runId: string): void {
    this.m?.admissionToFirstResult.get(runnerId).observe(secondsSince(admittedAt));
    this.tracing.runEvent(runId, 'first result');
  }

  /** The run's outcome; `runId` ends its trace span too (a run that never had one passes null). */
  runEnded(
    runnerId: string,
    status: string,
    admittedAt: number,
    runId: string | null = null,
    errorCode: string | null = null,
  ): void {
    if (runId !== null) {
      this.tracing.runEnded(runId, status, errorCode);
    }
    const m = this.m;
    if (m) {
      m.runsEnded.get(status, runnerId).inc();
      m.admissionToEnd.get(runnerId).observe(secondsSince(admittedAt));
    }
  }

  resultIngested(kind: ResultKind): void {
    this.m?.results.get(kind).inc();
  }

  sseOpened(): void {
    this.m?.sseOpened.inc();
  }

  /** A PostgreSQL writer group whose guess missed, run again awaited (docs/durability.md#the-writers-transactions-on-postgresql). */
  writerGuessMissed(): void {
    this.m?.writerGuessesMissed.inc();
  }

  /** A run's write refused by its fence (docs/scale-out.md#fenced-writes). */
  fencedWrite(): void {
    this.m?.fencedWrites.inc();
  }

  /** A dead owner's run taken over by this process's sweep. */
  runTakenOver(kind: 'requeued' | 'interrupted'): void {
    this.m?.runsTakenOver.get(kind).inc();
  }

  /** The end of a conversation's run: its `conversation` signal sent (a run waits) or skipped (docs/scale-out.md#signal-bus). */
  conversationSignal(outcome: 'sent' | 'skipped'): void {
    this.m?.conversationSignals.get(outcome).inc();
  }

  sseCut(): void {
    this.m?.sseCut.inc();
  }

  /** A follow-up steered into a running run at `position` of its queue. */
  steered(position: number): void {
    this.m?.steeringQueuePosition.observe(position);
  }

  steeringPulled(items: number, waitedMs: number): void {
    const m = this.m;
    if (m) {
      m.steeringPulls.get(items > 0 ? 'items' : 'empty').inc();
      m.steeringPullWait.observe(waitedMs / 1000);
    }
  }

  deliveryOps(ops: readonly { op: string }[]): void {
    const m = this.m;
    if (m) {
      for (const o of ops) {
        m.deliveryOps.get(o.op).inc();
      }
    }
  }

  /** One webhook attempt of a delivery op; `startedMs` from `now()`. */
  webhookAttempt(
    outcome: 'delivered' | 'retry' | 'failed',
    op: { run_id: string; op: string },
    attempt: number,
    startedMs: number,
    status: number | null,
  ): void {
    this.m?.webhookAttempts.get(outcome).inc();
    this.tracing.webhookAttempt(op.run_id, op.op, attempt, startedMs, outcome, status);
  }

  /** `outcome`: `ok` or the protocol error code; `startedMs` from `now()`. */
  hostApiCall(action: string, outcome: string, startedMs: number): void {
    const m = this.m;
    if (m) {
      m.hostApiCalls.get(action, outcome).inc();
      m.hostApiLatency.get(action).observe((performance.now() - startedMs) / 1000);
    }
  }

  modelCall(
    modelId: string,
    operation: string,
    outcome: 'ok' | 'error',
    startedMs: number,
    promptTokens: number | null,
    completionTokens: number | null,
    runId: string,
  ): void {
    this.tracing.modelCall(runId, modelId, operation, startedMs, outcome === 'error', promptTokens, completionTokens);
    const m = this.m;
    if (m) {
      m.modelCalls.get(modelId, operation, outcome).inc();
      m.modelLatency.get(modelId, operation).observe((performance.now() - startedMs) / 1000);
      if (promptTokens) {
        m.modelTokens.get(modelId, 'prompt').inc(promptTokens);
      }
      if (completionTokens) {
        m.modelTokens.get(modelId, 'completion').inc(completionTokens);
      }
    }
  }

  toolCall(source: string, outcome: 'ok' | 'error', startedMs: number, toolName: string, runId: string): void {
    this.tracing.toolCall(runId, toolName, source, startedMs, outcome === 'error');
    const m = this.m;
    if (m) {
      m.toolCalls.get(source, outcome).inc();
      m.toolLatency.get(source).observe((performance.now() - startedMs) / 1000);
    }
  }

  runnerConnected(pluginId: string, reconnect: boolean): void {
    this.m?.runnerConnects.get(pluginId, reconnect ? 'reconnect' : 'first').inc();
  }

  runnerDisconnected(pluginId: string): void {
    this.m?.runnerDisconnects.get(pluginId).inc();
  }

  /** One writer transaction: its unit count and latency; `replayed` when the group failed and was replayed. */
  writerGroup(units: number, startedMs: number, replayed: boolean): void {
    const m = this.m;
    if (m) {
      m.writerGroupSize.observe(units);
      m.writerCommit.observe((performance.now() - startedMs) / 1000);
      if (replayed) {
        m.writerReplays.inc();
      }
    }
  }
}

function secondsSince(epochMs: number): number {
  return Math.max(0, Date.now() - epochMs) / 1000;
}

/** The process's telemetry. */
export const telemetry = new Telemetry();
