import { parseAgentConfig } from './config';
import type { AgentRunContext, JsonObject, LocalAgentHostPort } from './host-port';
import { UsageTracker } from './model/usage';
import { AgentLoop, type TraceTurn } from './run/agent-loop';
import { assemble, NoAuthorizedModelError } from './run/assembly';
import { errorMessage, RunControls, RunStopped } from './run/controls';
import { ResultSink } from './run/result-sink';
import { loadSkills } from './skills/skill-loader';
import { approvalPolicy, takeApproval } from './tools/approval';

/** Injectable clocks and logging (tests); production uses the defaults. */
export interface LocalAgentOptions {
  now?: () => Date;
  warn?: (message: string) => void;
  /** Wraps each turn of the loop (the host's trace span per turn); default: runs it. */
  traceTurn?: TraceTurn;
}

const STOP_RESULT = {
  cancelled: { error: 'Run cancellation requested', code: 'cancelled', retryable: false },
  timeout: { error: 'Agent run timed out', code: 'runner.timeout', retryable: true },
} as const;

/**
 * Runs the local agent for one run: reads the context, calls the host only through `port`, and
 * emits its results (exactly one terminal result) through `port.emit`. Resolves when the run has
 * ended; never rejects (an emit failure is the host's to handle). `config` defaults to
 * `context.config`.
 */
export async function runLocalAgent(
  port: LocalAgentHostPort,
  context: AgentRunContext,
  config: JsonObject = context.config ?? {},
  options: LocalAgentOptions = {},
): Promise<void> {
  const now = options.now ?? (() => new Date());
  const warn = options.warn ?? (() => undefined);
  const cfg = parseAgentConfig(config);
  const sink = new ResultSink(port);
  const usage = new UsageTracker();
  const deadlineAt = context.runtime?.deadline_at;
  const controls = new RunControls(
    port,
    cfg.timeout,
    typeof deadlineAt === 'number' && Number.isFinite(deadlineAt) ? deadlineAt * 1000 : null,
    context.context?.available_apis?.run_get === true,
  );
  /** A failure, unless the run has stopped meanwhile: then the stop is the truth (e.g. the deadline). */
  const fail = async (error: string, code: string, retryable: boolean) => {
    const stop = controls.stopReason ?? (controls.deadlinePassed() ? 'timeout' : null);
    if (stop) {
      throw new RunStopped(stop);
    }
    await sink.fail(error, code, retryable, usage.snapshot());
  };
  try {
    await controls.pollCancel();
    let assembly;
    let resume = null;
    try {
      const skills = await controls.race(loadSkills(port.skill_roots ?? [], warn));
      // docs/interactions.md#tool-approval-local-agent: the approval this conversation waits for, taken once.
      resume = await takeApproval(port, controls, context, now().getTime(), warn, approvalPolicy(cfg));
      assembly = await assemble({ port, controls, context, config: cfg, skills, now, warn, resume });
    } catch (e) {
      if (e instanceof RunStopped) {
        throw e;
      }
      if (e instanceof NoAuthorizedModelError) {
        await fail(e.message, 'runner.no_model', false);
      } else {
        await fail(errorMessage(e) || 'Agent run assembly failed', 'runner.error', false);
      }
      return;
    }
    await controls.pollCancel();
    const loop = new AgentLoop({
      port,
      controls,
      sink,
      context,
      config: cfg,
      assembly,
      usage,
      clock: () => now().getTime(),
      warn,
      traceTurn: options.traceTurn ?? ((_n, fn) => fn(() => undefined)),
      approval: { policy: approvalPolicy(cfg), resume },
    });
    const outcome = await loop.run();
    if (!outcome.ok) {
      await fail(outcome.failure.message, outcome.failure.code, outcome.failure.retryable);
      return;
    }
    await controls.pollCancel(); // a cancel discovered at the end wins over completion
    if (outcome.answer) {
      await sink.emit({ type: 'message.completed', data: { message: outcome.answer } });
    }
    const u = usage.snapshot();
    const finish = outcome.waiting ? 'interaction_requested' : 'stop';
    await sink.emit({ type: 'run.completed', data: { finish_reason: finish }, ...(u ? { usage: u } : {}) });
  } catch (e) {
    const r = e instanceof RunStopped ? STOP_RESULT[e.reason] : null;
    if (!sink.terminated) {
      await sink
        .fail(
          r?.error ?? (errorMessage(e) || 'Agent run failed'),
          r?.code ?? 'runner.error',
          r?.retryable ?? false,
          usage.snapshot(),
        )
        .catch(() => undefined); // the sink itself failed: nothing more this run can report
    }
  } finally {
    controls.dispose();
  }
}
