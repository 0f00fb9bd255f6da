import { HostApiError, RunAbortedError } from './errors';
import { registerFaults } from './faults';
import { RunHostApi, type HostApiTransport, type SteeringItem } from './host-api';
import type { JsonObject } from './json';
import { startMcpBridge, type McpBridge, type McpBridgeOptions } from './mcp-bridge';
import { RunResults, type Outbox } from './results';
import {
  TERMINAL_RESULT_TYPES,
  type ConfigSchemaItem,
  type I18n,
  type Input,
  type RunContext,
  type RunnerCapabilities,
  type RunnerManifest,
  type RunnerPermissions,
  type RunRequest,
  type RunResult,
} from './types';

/*
 * A runner is one `run(ctx, io)` handler plus its manifest. The dispatcher runs each request in
 * its own AbortController: the signal fires on the host's cancel, at the run's deadline, and when
 * the connection is lost. Whatever the handler does (returns, throws, ignores the signal), its
 * run gets exactly one terminal result, and nothing it does reaches another run.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type Logger = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;

/** Default logger: warnings and errors on stderr, one JSON line each. */
export const stderrLogger: Logger = (level, message, fields) => {
  if (level === 'warn' || level === 'error') {
    process.stderr.write(`${JSON.stringify({ level, msg: `runner-sdk: ${message}`, ...fields })}\n`);
  }
};

/** One turn of a run: the run's own input first, then each steered follow-up. */
export interface Turn {
  /** 0 for the run's input, then 1, 2, ... */
  index: number;
  text: string;
  input: Input | JsonObject;
  /** The SteeringInputItem of a steered follow-up; null for the first turn. */
  item: SteeringItem | null;
}

export interface TurnsOptions {
  /** How long a pull at a turn boundary waits for a follow-up (ms, 0..30000; default 0). */
  waitMs?: number;
  /** `all` (default): every queued follow-up at once; `one`: one per pull. */
  mode?: 'all' | 'one';
}

/** What a run handler gets besides its context: the signal, the result emitters and the host API. */
export interface RunIO {
  readonly runId: string;
  /** Fires on cancel, at the deadline and on connection loss; `reason` is a RunAbortedError. */
  readonly signal: AbortSignal;
  /** The run's deadline (from `ctx.runtime.deadline_at`), or null. */
  readonly deadline: Date | null;
  /** The host API, bound to this run (its id, signal and deadline). */
  readonly host: RunHostApi;
  readonly log: Logger;

  delta: RunResults['delta'];
  message: RunResults['message'];
  toolCallStarted: RunResults['toolCallStarted'];
  toolCallCompleted: RunResults['toolCallCompleted'];
  state: RunResults['state'];
  emit: RunResults['emit'];
  completed: RunResults['completed'];
  failed: RunResults['failed'];

  /**
   * Calls a host tool and reports it: `tool.call.started`, then `tool.call.completed` with its
   * result or error. Returns the result; a refusal or failure is thrown after being reported.
   */
  toolCall(name: string, parameters?: JsonObject, opts?: { id?: string }): Promise<JsonObject>;

  /**
   * The steering loop: yields the run's own input as the first turn, then, at each turn
   * boundary (when the handler asks for the next turn), the follow-ups steered into the run,
   * until a pull finds none. Without the `steering_pull` grant it yields the first turn only.
   */
  turns(opts?: TurnsOptions): AsyncIterable<Turn>;

  /** The follow-ups queued now (a pull without waiting); [] when steering is not granted. */
  drainSteering(): Promise<SteeringItem[]>;

  /**
   * Starts the run's MCP bridge (docs/runner-sdk.md#the-run-scoped-mcp-bridge): an MCP server
   * listing what this run was granted, every call made through `host`; closed at the run's end.
   */
  mcpBridge(options?: McpBridgeOptions): Promise<McpBridge>;
}

export type RunHandler = (ctx: RunContext, io: RunIO) => Promise<void> | void;

export interface RunnerDefinition {
  /** The runner component name (the last part of its id), e.g. `default`. */
  name: string;
  label?: I18n;
  description?: I18n;
  capabilities?: RunnerCapabilities;
  permissions?: RunnerPermissions;
  configSchema?: ConfigSchemaItem[];
  run: RunHandler;
}

const RUNNER_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** How long after the deadline the SDK sends its own `runner.timeout` (the signal fires at the deadline). */
export const DEADLINE_VERDICT_GRACE_MS = 1_000;

/** Checks a definition and returns it typed. */
export function defineRunner(definition: RunnerDefinition): RunnerDefinition {
  if (!RUNNER_NAME.test(definition.name)) {
    throw new TypeError(`runner name must match ${RUNNER_NAME.source} (got "${definition.name}")`);
  }
  if (typeof definition.run !== 'function') {
    throw new TypeError(`runner "${definition.name}": run must be a function`);
  }
  return definition;
}

/** The manifest of a runner of plugin `author/plugin`, as sent in hello. */
export function manifestOf(definition: RunnerDefinition, author: string, plugin: string): RunnerManifest {
  return {
    id: `plugin:${author}/${plugin}/${definition.name}`,
    name: definition.name,
    label: definition.label ?? { en_US: definition.name },
    description: definition.description ?? null,
    protocol_version: '1',
    capabilities: definition.capabilities ?? {},
    permissions: definition.permissions ?? {},
    config_schema: definition.configSchema ?? [],
    metadata: {},
  };
}

interface ActiveRun {
  controller: AbortController;
  results: RunResults;
  timer: NodeJS.Timeout | undefined;
  /** What ends with the run (its MCP bridges). */
  closers: (() => Promise<void>)[];
  /** Set by the protocol fault hook ignoreCancel() (faults.ts): cancel and deadline do nothing. */
  ignoreCancel: boolean;
}

function textOf(input: Input | JsonObject | null | undefined): string {
  const text = (input as { text?: unknown } | null | undefined)?.text;
  return typeof text === 'string' ? text : '';
}

/** Runs requests with the runners of one plugin; results go to one outbox. */
export class RunDispatcher {
  private readonly runners = new Map<string, RunnerDefinition>();
  private readonly active = new Map<string, ActiveRun>();

  constructor(
    runners: RunnerDefinition[],
    private readonly outbox: Pick<Outbox, 'push' | 'maxFrameBytes'>,
    private readonly transport: HostApiTransport,
    private readonly log: Logger = stderrLogger,
  ) {
    for (const r of runners) {
      if (this.runners.has(r.name)) {
        throw new TypeError(`two runners are named "${r.name}"`);
      }
      this.runners.set(r.name, r);
    }
  }

  /** Ids of the runs still active (heartbeats report them). */
  activeRunIds(): string[] {
    return [...this.active.keys()];
  }

  /** Runs one request to its end; never rejects. */
  async start(request: RunRequest): Promise<void> {
    const ctx = request.context;
    const runId = ctx.run_id;
    if (this.active.has(runId)) {
      this.log('warn', 'duplicate run request ignored', { run_id: runId });
      return;
    }
    const results = new RunResults(runId, this.outbox);
    const runner = this.runners.get(request.runner_name);
    if (!runner) {
      await results.failed(`this plugin has no runner named "${request.runner_name}"`, { code: 'runner.not_found' });
      return;
    }
    const controller = new AbortController();
    const run: ActiveRun = { controller, results, timer: undefined, closers: [], ignoreCancel: false };
    this.active.set(runId, run);
    const deadlineAt = ctx.runtime?.deadline_at;
    const deadline = typeof deadlineAt === 'number' && deadlineAt > 0 ? new Date(deadlineAt * 1000) : null;
    if (deadline) {
      run.timer = setTimeout(
        () => this.abort(runId, new RunAbortedError('deadline', 'the run reached its deadline')),
        Math.max(0, deadline.getTime() - Date.now()),
      );
      run.timer.unref();
    }
    const io = this.makeIO(ctx, run, deadline, request.traceparent || undefined);
    try {
      await runner.run(ctx, io);
      if (!controller.signal.aborted) {
        await results.completed();
      }
    } catch (err) {
      if (!controller.signal.aborted && (await this.cancelledMeanwhile(err, io.host))) {
        // The host stops a run's calls when it cancels it, a moment before its cancel arrives.
        await results.failed('cancelled', { code: 'cancelled' });
      } else if (!controller.signal.aborted) {
        this.log('warn', 'run handler threw; the run fails', { run_id: runId, error: String(err) });
        await results.failed(err instanceof Error ? err : String(err), {
          code: 'runner.exception',
          retryable: err instanceof HostApiError ? err.retryable : false,
        });
      }
    } finally {
      this.finish(runId, run);
    }
  }

  /** The host's cancel: the run's signal fires and `run.failed` (code `cancelled`) goes out at once. */
  cancel(runId: string, reason: string): void {
    this.abort(runId, new RunAbortedError('cancelled', reason || 'cancelled by the host'));
  }

  /** Every run stops: `disconnected` sends nothing more (the stream is gone), `stopped` fails them. */
  abortAll(kind: 'disconnected' | 'stopped'): void {
    for (const runId of [...this.active.keys()]) {
      this.abort(
        runId,
        new RunAbortedError(
          kind,
          kind === 'stopped' ? 'the runner is stopping' : 'the connection to the host was lost',
        ),
      );
    }
  }

  private abort(runId: string, reason: RunAbortedError): void {
    const run = this.active.get(runId);
    if (!run || run.controller.signal.aborted) {
      return;
    }
    if (run.ignoreCancel && (reason.kind === 'cancelled' || reason.kind === 'deadline')) {
      this.log('warn', 'cancel ignored (protocol fault hook ignoreCancel)', { run_id: runId, reason: reason.message });
      return;
    }
    switch (reason.kind) {
      case 'cancelled':
        void run.results.failed(`cancelled: ${reason.message}`, { code: 'cancelled' });
        break;
      case 'deadline': {
        // The host enforces the deadline itself and its verdict comes first (docs/protocol.md#deadline);
        // this one, as retryable as the host's, only ends a run the host did not end (it drops it otherwise).
        const verdict = setTimeout(
          () => void run.results.failed('the run reached its deadline', { code: 'runner.timeout', retryable: true }),
          DEADLINE_VERDICT_GRACE_MS,
        );
        verdict.unref();
        break;
      }
      case 'stopped':
        void run.results.failed('the runner stopped', { code: 'runner.stopped', retryable: true });
        break;
      case 'disconnected':
        run.results.close();
        break;
    }
    this.finish(runId, run);
    run.controller.abort(reason);
  }

  /** A host API failure of a run the host is cancelling: RunGet says so (cancel_requested). */
  private async cancelledMeanwhile(err: unknown, host: RunHostApi): Promise<boolean> {
    if (!(err instanceof HostApiError)) {
      return false;
    }
    const run = await host.run.get().catch(() => null);
    return run?.cancel_requested === true;
  }

  private finish(runId: string, run: ActiveRun): void {
    clearTimeout(run.timer);
    for (const close of run.closers.splice(0)) {
      void close().catch((err: unknown) =>
        this.log('warn', 'closing a run resource failed', { run_id: runId, error: String(err) }),
      );
    }
    if (this.active.get(runId) === run) {
      this.active.delete(runId);
    }
  }

  private makeIO(ctx: RunContext, run: ActiveRun, deadline: Date | null, traceparent?: string): RunIO {
    const { results } = run;
    const signal = run.controller.signal;
    // No gRPC deadline per call: the run's signal fires at its deadline (start() above) and ends
    // every call in flight; a deadline per call cost a timer and a `grpc-timeout` header on each
    // side of each call (docs/runner-sdk.md#performance). The host refuses calls past it itself.
    const host = new RunHostApi(this.transport, ctx.run_id, signal, undefined, traceparent);
    const steeringGranted = ctx.context?.available_apis?.steering_pull === true;
    let toolCalls = 0;
    const io: RunIO = {
      runId: ctx.run_id,
      signal,
      deadline,
      // Not a getter made lazy: an accessor in this literal cost a run more than the RunHostApi.
      host,
      log: this.log,
      delta: (piece) => results.delta(piece),
      message: (message, usage) => results.message(message, usage),
      toolCallStarted: (call) => results.toolCallStarted(call),
      toolCallCompleted: (call) => results.toolCallCompleted(call),
      state: (scope, key, value) => results.state(scope, key, value),
      emit: (type, data, usage) => results.emit(type, data, usage),
      completed: (options) => results.completed(options),
      failed: (error, options) => results.failed(error, options),
      toolCall: async (name, parameters = {}, opts = {}) => {
        const id = opts.id ?? `call_${++toolCalls}`;
        void results.toolCallStarted({ id, name, parameters });
        try {
          const result = await host.tools.call(name, parameters);
          void results.toolCallCompleted({ id, name, result });
          return result;
        } catch (err) {
          void results.toolCallCompleted({ id, name, error: err instanceof Error ? err.message : String(err) });
          throw err;
        }
      },
      drainSteering: async () => (steeringGranted ? host.steering.pull({ wait_ms: 0 }) : []),
      turns: (opts = {}) => turns(ctx, host, steeringGranted, signal, opts),
      mcpBridge: async (options) => {
        const bridge = await startMcpBridge(ctx, host, signal, options);
        if (this.active.get(ctx.run_id) === run) {
          run.closers.push(() => bridge.close());
        } else {
          await bridge.close(); // the run ended while the bridge was starting
        }
        return bridge;
      },
    };
    registerFaults(io, {
      sendRaw: ({ type, data, usage, sequence }) => {
        const raw = { run_id: ctx.run_id, type, data, timestamp: Math.floor(Date.now() / 1000) } as RunResult;
        if (typeof sequence === 'number') {
          raw.sequence = sequence;
        }
        if (usage) {
          raw.usage = usage;
        }
        if (TERMINAL_RESULT_TYPES.has(type)) {
          results.close(); // the run's own emitters (and the dispatcher's terminal rule) send nothing more
        }
        return this.outbox.push(raw);
      },
      ignoreCancel: () => {
        run.ignoreCancel = true;
      },
    });
    return io;
  }
}

async function* turns(
  ctx: RunContext,
  host: RunHostApi,
  granted: boolean,
  signal: AbortSignal,
  opts: TurnsOptions,
): AsyncIterable<Turn> {
  let index = 0;
  yield { index: index++, text: textOf(ctx.input), input: ctx.input ?? { text: '' }, item: null };
  if (!granted) {
    return;
  }
  while (!signal.aborted) {
    const items = await host.steering.pull({ wait_ms: opts.waitMs ?? 0, mode: opts.mode });
    if (items.length === 0) {
      return;
    }
    for (const item of items) {
      yield { index: index++, text: textOf(item.input), input: item.input, item };
    }
  }
}
