import * as os from 'node:os';
import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { FastCounter, FastHistogram } from './fast-metrics';

/**
 * The host's Prometheus metrics (docs: docs/observability.md, "Metrics"). One registry per process,
 * owned by `telemetry` below; the services that own a fact call one method here. Label values
 * are bounded: statuses, outcomes, actions and result types come from closed sets; runner,
 * plugin and model ids are the operator's catalogue. No run ids, no user text.
 *
 * Hot-path methods use label children bound once and cached (`Children`, over the plain-number
 * metrics of fast-metrics.ts), so a call is a map lookup and an addition. Gauges that describe a state (active runs, queue depths, WAL size,
 * outbox lag) are read at scrape time through `sample`, costing nothing between scrapes.
 */

const PREFIX = 'runnerhost_';

/** Latency buckets in seconds: 1 ms .. 60 s. */
const LATENCY = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Run phase buckets in seconds: 1 ms .. 1 h. */
const RUN_PHASE = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** Units per writer group. */
const GROUP_SIZE = [1, 2, 4, 8, 16, 32, 64, 128, 256];

type Inc = { inc(n?: number): void };
type Obs = { observe(v: number): void };

/** Label children of one metric, bound once per distinct label tuple (up to three labels). */
class Children<C> {
  private readonly cache = new Map<string, C>();

  constructor(private readonly metric: { child(values: readonly string[]): C }) {}

  get(a: string, b = '', c = ''): C {
    const key = c ? `${a}\u0000${b}\u0000${c}` : b ? `${a}\u0000${b}` : a;
    let child = this.cache.get(key);
    if (child === undefined) {
      child = this.metric.child([a, b, c]);
      this.cache.set(key, child);
    }
    return child;
  }
}

/** Values read at scrape time. */
export type SampleName =
  | 'active_runs'
  | 'sse_readers'
  | 'writer_queue_depth'
  | 'wal_bytes'
  | 'runner_connections'
  | 'outbox_oldest_pending_age_seconds';

/**
 * The counters a signal bus keeps (docs/scale-out.md#signal-bus): monotonic since the process
 * started, read at scrape time. Structurally the cluster lib's `SignalBusStats`.
 */
export interface SignalBusCounts {
  sent: number;
  received: number;
  dropped: number;
  oversized: number;
  disconnects: number;
  connected: boolean;
}

/** The bus's signal counters, one `outcome` each. */
const SIGNAL_OUTCOMES = ['sent', 'received', 'dropped', 'oversized'] as const;

export interface MetricsOptions {
  /** The `host_instance` label every series carries (HOST_INSTANCE_ID, default hostname:pid). */
  instance: string;
  /** Node process metrics (CPU, memory, GC, event-loop lag). */
  processMetrics?: boolean;
}

export function defaultInstanceId(): string {
  return `${os.hostname()}:${process.pid}`;
}

/** The metrics of one host process. Created by `telemetry.enableMetrics`. */
export class HostMetrics {
  readonly registry = new Registry();
  private readonly samplers = new Map<SampleName, () => number | null | Promise<number | null>>();
  private signalBusReader: { bus: string; read: () => SignalBusCounts } | null = null;

  readonly runsAdmitted: Children<Inc>;
  readonly runsEnded: Children<Inc>;
  readonly admissionToDispatch: Children<Obs>;
  readonly admissionToFirstResult: Children<Obs>;
  readonly admissionToEnd: Children<Obs>;
  readonly results: Children<Inc>;
  readonly sseCut: Inc;
  readonly sseOpened: Inc;
  readonly steeringPulls: Children<Inc>;
  readonly steeringPullWait: Obs;
  readonly steeringQueuePosition: Obs;
  readonly deliveryOps: Children<Inc>;
  readonly webhookAttempts: Children<Inc>;
  readonly hostApiCalls: Children<Inc>;
  readonly hostApiLatency: Children<Obs>;
  readonly modelCalls: Children<Inc>;
  readonly modelTokens: Children<Inc>;
  readonly modelLatency: Children<Obs>;
  readonly toolCalls: Children<Inc>;
  readonly toolLatency: Children<Obs>;
  readonly runnerConnects: Children<Inc>;
  readonly runnerDisconnects: Children<Inc>;
  readonly writerGroupSize: Obs;
  readonly writerCommit: Obs;
  readonly writerReplays: Inc;
  readonly writerGuessesMissed: Inc;
  readonly fencedWrites: Inc;
  readonly runsTakenOver: Children<Inc>;
  readonly conversationSignals: Children<Inc>;

  constructor(opts: MetricsOptions) {
    const r = this.registry;
    r.setDefaultLabels({ host_instance: opts.instance });
    if (opts.processMetrics !== false) {
      collectDefaultMetrics({ register: r, eventLoopMonitoringPrecision: 10 });
    }
    const counter = (name: string, help: string, labelNames: readonly string[]) =>
      new FastCounter(PREFIX + name, help, labelNames, r);
    const histogram = (name: string, help: string, labelNames: readonly string[], buckets: number[]) =>
      new FastHistogram(PREFIX + name, help, labelNames, buckets, r);
    const counters = (c: FastCounter, _names: readonly string[]) => new Children<Inc>(c);
    const histograms = (h: FastHistogram, _names: readonly string[]) => new Children<Obs>(h);

    const admitted = ['disposition', 'runner_id'] as const;
    this.runsAdmitted = counters(
      counter(
        'events_admitted_total',
        'Events admitted, by disposition (started, steered, queued, failed, rejected, replayed) and runner.',
        admitted,
      ),
      admitted,
    );
    const ended = ['status', 'runner_id'] as const;
    this.runsEnded = counters(counter('runs_ended_total', 'Runs ended, by final status and runner.', ended), ended);
    const runner = ['runner_id'] as const;
    this.admissionToDispatch = histograms(
      histogram(
        'run_admission_to_dispatch_seconds',
        'From admission to the run message sent to its runner (queued runs include their wait).',
        runner,
        RUN_PHASE,
      ),
      runner,
    );
    this.admissionToFirstResult = histograms(
      histogram(
        'run_admission_to_first_result_seconds',
        "From admission to the runner's first accepted result.",
        runner,
        RUN_PHASE,
      ),
      runner,
    );
    this.admissionToEnd = histograms(
      histogram('run_admission_to_end_seconds', 'From admission to the terminal outcome decided.', runner, RUN_PHASE),
      runner,
    );
    const kind = ['kind'] as const;
    this.results = counters(
      counter('results_ingested_total', 'Runner results accepted, by kind (delta, result, terminal).', kind),
      kind,
    );
    this.sseOpened = counter('sse_readers_opened_total', 'SSE readers opened (run and delivery streams).', []);
    this.sseCut = counter(
      'sse_readers_cut_total',
      'SSE readers cut for a live backlog over SSE_MAX_BACKLOG_BYTES.',
      [],
    );
    const outcome = ['outcome'] as const;
    this.steeringPulls = counters(
      counter('steering_pulls_total', 'Steering pulls by runners, by outcome (items, empty).', outcome),
      outcome,
    );
    this.steeringPullWait = histogram(
      'steering_pull_wait_seconds',
      'Time a steering pull waited before it answered.',
      [],
      LATENCY,
    );
    this.steeringQueuePosition = histogram(
      'steering_queue_depth',
      "A run's steering queue depth when a follow-up joins it (the item's position).",
      [],
      [1, 2, 3, 5, 10, 20, 50, 100],
    );
    const op = ['op'] as const;
    this.deliveryOps = counters(counter('delivery_ops_total', 'Delivery ops committed to the outbox, by op.', op), op);
    this.webhookAttempts = counters(
      counter('webhook_attempts_total', 'Webhook attempts, by outcome (delivered, retry, failed).', outcome),
      outcome,
    );
    const action = ['action', 'outcome'] as const;
    this.hostApiCalls = counters(
      counter('host_api_calls_total', 'Host API calls by action and outcome (ok or the protocol error code).', action),
      action,
    );
    const actionOnly = ['action'] as const;
    this.hostApiLatency = histograms(
      histogram('host_api_call_duration_seconds', 'Host API call latency by action.', actionOnly, LATENCY),
      actionOnly,
    );
    const model = ['model_id', 'operation', 'outcome'] as const;
    this.modelCalls = counters(
      counter('model_calls_total', 'Proxied model calls by model, operation and outcome.', model),
      model,
    );
    const tokens = ['model_id', 'type'] as const;
    this.modelTokens = counters(
      counter('model_tokens_total', 'Tokens metered by model and type (prompt, completion).', tokens),
      tokens,
    );
    const modelOp = ['model_id', 'operation'] as const;
    this.modelLatency = histograms(
      histogram('model_call_duration_seconds', 'Model call latency by model and operation.', modelOp, LATENCY),
      modelOp,
    );
    const tool = ['source', 'outcome'] as const;
    this.toolCalls = counters(
      counter('tool_calls_total', 'Tool calls by source kind (mcp, http, builtin) and outcome.', tool),
      tool,
    );
    const source = ['source'] as const;
    this.toolLatency = histograms(
      histogram('tool_call_duration_seconds', 'Tool call latency by source kind.', source, LATENCY),
      source,
    );
    const plugin = ['plugin_id', 'kind'] as const;
    this.runnerConnects = counters(
      counter('runner_connects_total', 'Plugin Connect streams opened, by plugin and kind (first, reconnect).', plugin),
      plugin,
    );
    const pluginOnly = ['plugin_id'] as const;
    this.runnerDisconnects = counters(
      counter('runner_disconnects_total', 'Plugin Connect streams ended, by plugin.', pluginOnly),
      pluginOnly,
    );
    this.writerGroupSize = histogram(
      'writer_group_units',
      'Units per writer transaction (group commit).',
      [],
      GROUP_SIZE,
    );
    this.writerCommit = histogram(
      'writer_commit_duration_seconds',
      'Writer transaction latency (one group).',
      [],
      LATENCY,
    );
    this.writerReplays = counter(
      'writer_group_replays_total',
      'Writer groups that failed and were replayed unit by unit.',
      [],
    );

    this.writerGuessesMissed = counter(
      'writer_guesses_missed_total',
      "PostgreSQL writer groups whose guess missed (a run's end already ended, or items queued on it) and that ran again with every answer awaited.",
      [],
    );
    this.fencedWrites = counter(
      'fenced_writes_total',
      'Writes of a run refused by its fence (another process owns it now); the run is dropped here.',
      [],
    );
    const takeover = ['kind'] as const;
    this.runsTakenOver = counters(
      counter('runs_taken_over_total', 'Runs of dead processes taken over, by kind (requeued, interrupted).', takeover),
      takeover,
    );
    const sent = ['outcome'] as const;
    this.conversationSignals = counters(
      counter(
        'conversation_signals_total',
        'Ends of conversation runs: the conversation signal sent (a run waits in it) or skipped (nothing waits).',
        sent,
      ),
      sent,
    );

    this.gauge('active_runs', 'Runs active in this process.');
    this.gauge('sse_readers', 'Open SSE readers (run and delivery streams).');
    this.gauge('writer_queue_depth', 'Units waiting for the writer.');
    this.gauge('wal_bytes', 'SQLite WAL file size as the checkpoint worker last saw it.');
    this.gauge('runner_connections', 'Live plugin Connect streams.');
    this.gauge('outbox_oldest_pending_age_seconds', 'Age of the oldest webhook op still pending (0 when none).');
    this.signalBusMetrics();
  }

  /** Registers the reader of the signal bus's counters; the last one registered wins. */
  signalBus(bus: string, read: () => SignalBusCounts): void {
    this.signalBusReader = { bus, read };
  }

  /**
   * The bus keeps its own counts (it is built before, and without, the registry): these series
   * copy them at scrape time. A reader that fails leaves the series out of that scrape.
   */
  private signalBusMetrics(): void {
    const reading = (): { bus: string; counts: SignalBusCounts } | null => {
      const r = this.signalBusReader;
      if (!r) {
        return null;
      }
      try {
        return { bus: r.bus, counts: r.read() };
      } catch {
        return null;
      }
    };
    new Counter({
      name: PREFIX + 'signal_bus_signals_total',
      help: 'Signal bus traffic with other processes, by bus and outcome (sent, received, dropped, oversized: delivered here only).',
      labelNames: ['bus', 'outcome'],
      registers: [this.registry],
      collect() {
        const now = reading();
        this.reset();
        if (now) {
          for (const outcome of SIGNAL_OUTCOMES) {
            this.inc({ bus: now.bus, outcome }, now.counts[outcome]);
          }
        }
      },
    });
    new Counter({
      name: PREFIX + 'signal_bus_disconnects_total',
      help: 'Times the signal bus lost its transport (each followed by a reconnect).',
      labelNames: ['bus'],
      registers: [this.registry],
      collect() {
        const now = reading();
        this.reset();
        if (now) {
          this.inc({ bus: now.bus }, now.counts.disconnects);
        }
      },
    });
    new Gauge({
      name: PREFIX + 'signal_bus_connected',
      help: 'Whether the signal bus is connected to its transport (1) or not (0; the memory bus is always 1).',
      labelNames: ['bus'],
      registers: [this.registry],
      collect() {
        const now = reading();
        this.reset();
        if (now) {
          this.set({ bus: now.bus }, now.counts.connected ? 1 : 0);
        }
      },
    });
  }

  /** Registers the reader of a gauge; the last one registered wins. */
  sample(name: SampleName, read: () => number | null | Promise<number | null>): void {
    this.samplers.set(name, read);
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private gauge(name: SampleName, help: string): Metric {
    const samplers = this.samplers;
    return new Gauge({
      name: PREFIX + name,
      help,
      registers: [this.registry],
      async collect() {
        const read = samplers.get(name);
        if (!read) {
          return;
        }
        try {
          const v = await read();
          if (v !== null) {
            this.set(v);
          }
        } catch {
          // A sampler that fails leaves the last value; the scrape still answers.
        }
      },
    });
  }
}
