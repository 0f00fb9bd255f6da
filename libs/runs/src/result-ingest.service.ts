import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { textOf } from '@libs/delivery';
import type { RunnerResult } from '@libs/protocol';
import {
  TERMINAL_RESULT_TYPES,
  checkJson,
  isKnownResultType,
  usageSchema,
  validateResultPayload,
} from '@libs/protocol';
import { RunnerConnections, type RunnerSession } from '@libs/runner-gateway';
import { ActiveRuns } from './active-runs';
import { InteractionsService } from './interactions/interactions.service';
import { RunLifecycleService } from './run-lifecycle.service';
import type { ActiveRun } from './active-run';

/** The size of the message a delta streams, with it: its own text added, or its cumulative all_content. */
function messageBytesWith(run: ActiveRun, data: Record<string, unknown>): number {
  const chunk = (data.chunk ?? {}) as Record<string, unknown>;
  const all = chunk.all_content;
  return run.messageBytesWith(
    Buffer.byteLength(textOf(chunk.content)),
    typeof all === 'string' ? Buffer.byteLength(all) : null,
  );
}
import { telemetry } from '@libs/telemetry';

/**
 * The result rules (docs/protocol.md#result-rules) at the runner's edge: strict payload
 * validation of known types, unknown types kept, the size bounds; then the run's state machine
 * takes the result (`ActiveRun.accept`: sequence rules, one terminal result, nothing after it).
 * Each run's results are handled one after another in arrival order. It never ends a run: a
 * result it refuses is a verdict handed to the lifecycle.
 */
@Injectable()
export class ResultIngestService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('RunResults');
  private sub?: Subscription;

  constructor(
    private readonly connections: RunnerConnections,
    private readonly active: ActiveRuns,
    private readonly lifecycle: RunLifecycleService,
    private readonly interactions: InteractionsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.sub = this.connections.inbound$.subscribe((e) => {
      if (e.kind === 'result') {
        this.accept(e.session, e.result);
      } else {
        this.lifecycle.onDisconnected(e.session, e.reason);
      }
    });
  }

  onModuleDestroy(): void {
    this.sub?.unsubscribe();
  }

  accept(session: RunnerSession, result: RunnerResult): void {
    const run = this.active.get(result.run_id);
    const log = { run_id: result.run_id, type: result.type, sequence: result.sequence };
    if (!run || run.session.session_id !== session.session_id) {
      // Unknown, ended, or another plugin's run: nothing a runner sends can touch it.
      this.logger.warn({
        ...log,
        msg: `result dropped: run is not active on this plugin session (${session.plugin_id})`,
      });
      return;
    }
    if (run.ended) {
      this.logger.warn({ ...log, msg: 'result dropped: the run already has a terminal result' });
      return;
    }
    const terminal = TERMINAL_RESULT_TYPES.includes(result.type);
    // A terminal result the host cannot take still ends the run, at once, with the reason.
    const refuse = (why: string) => {
      this.logger.warn({ ...log, msg: `result dropped: ${why}` });
      if (terminal) {
        this.lifecycle.conclude(run, {
          status: 'failed',
          code: 'runner.invalid_result',
          error: `the runner's ${result.type} was refused: ${why}`,
          retryable: false,
        });
      }
    };
    const checked = validateResultPayload(result.type, result.data);
    if (!checked.ok) {
      refuse(`invalid ${result.type} payload: ${checked.reason}`);
      return;
    }
    // What the databases and later protobuf messages cannot carry (NUL, lone surrogates, depth).
    const problem = checkJson(checked.data, 'data') ?? (result.usage ? checkJson(result.usage, 'usage') : null);
    if (problem) {
      refuse(`${problem.field}: ${problem.rule}`);
      return;
    }
    const size = Buffer.byteLength(JSON.stringify(checked.data));
    if (size > this.config.runs.maxResultBytes) {
      refuse(`data is ${size} bytes, limit ${this.config.runs.maxResultBytes}`);
      return;
    }
    // One message may not grow past MAX_MESSAGE_BYTES (docs/configuration.md): the run fails.
    const messageBytes = result.type === 'message.delta' ? messageBytesWith(run, checked.data) : null;
    if (messageBytes !== null && messageBytes > this.config.runs.maxMessageBytes) {
      this.messageTooLarge(run, messageBytes);
      return;
    }
    const usage = result.usage && usageSchema.safeParse(result.usage).success ? result.usage : null;
    const timestamp = result.timestamp ?? null;
    const intake = run.accept({
      type: result.type,
      sequence: result.sequence,
      data: checked.data,
      usage,
      // Seconds since the epoch; anything a BIGINT column or a JSON number cannot carry exactly is dropped.
      timestamp: timestamp !== null && Number.isSafeInteger(timestamp) ? timestamp : null,
      messageBytes,
    });
    if (intake.kind === 'dropped') {
      this.logger.warn({ ...log, msg: intake.reason });
      return;
    }
    if (intake.warning) {
      this.logger.warn({ ...log, msg: intake.warning });
    }
    const row = intake.row;
    const kind = intake.kind === 'terminal' ? 'terminal' : result.type.endsWith('.delta') ? 'delta' : 'result';
    telemetry.resultIngested(kind);
    telemetry.tracing.resultAccepted(run.run_id, row.sequence, kind === 'delta');
    if (intake.first) {
      telemetry.runFirstResult(run.runner_id, run.admitted_at, run.run_id);
    }
    if (result.usage && !usage) {
      this.logger.warn({ ...log, msg: 'usage ignored: token counts must be non-negative integers' });
    }
    if (!isKnownResultType(result.type)) {
      this.logger.warn({ ...log, msg: `unknown result type ${result.type}: persisted and ignored` });
    }
    if (intake.kind === 'terminal') {
      return; // the run decided its end with it: its lifecycle writes it
    }
    if (row.type === 'action.requested') {
      // docs/interactions.md: interaction.requested executes (or fails the run, the rule named); other actions are recorded.
      const action = this.interactions.onAction(run, row);
      this.lifecycle.accept(run, row, { ...action, stored: intake.stored });
      if (action.refused !== null) {
        this.logger.warn({ ...log, msg: action.refused });
        this.lifecycle.conclude(run, {
          status: 'failed',
          code: 'runner.protocol_error',
          error: action.refused,
          retryable: false,
        });
      }
    } else {
      this.lifecycle.accept(run, row, { stored: intake.stored });
    }
  }

  /**
   * A delta would take the streamed message past the bound: it is dropped, the runner is told to
   * stop, and the run fails `runner.message_too_large` (not retryable: the same request would
   * stream the same answer). What was delivered so far ends as an incomplete answer, with the
   * failure notice.
   */
  private messageTooLarge(run: ActiveRun, bytes: number): void {
    const max = this.config.runs.maxMessageBytes;
    this.logger.warn({
      run_id: run.run_id,
      msg: `result dropped: the streamed message would reach ${bytes} bytes, limit ${max} (MAX_MESSAGE_BYTES); the run fails`,
    });
    run.session.send({ cancel: { run_id: run.run_id, reason: 'message too large' } });
    this.lifecycle.conclude(run, {
      status: 'failed',
      code: 'runner.message_too_large',
      error: `the streamed message exceeded ${max} bytes (MAX_MESSAGE_BYTES)`,
      retryable: false,
    });
  }
}
