import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import type { RunResult } from '@libs/proto';
import { TERMINAL_RESULT_TYPES, isKnownResultType, usageSchema, validateResultPayload } from '@libs/protocol';
import { RunnerConnections, type RunnerSession } from '@libs/runner-gateway';
import { ActiveRuns, type ActiveRun } from './active-runs';
import { RunLifecycleService } from './run-lifecycle.service';
import type { ResultView } from './run-stream.bus';

/**
 * The result-stream normaliser (SPEC §8): sequence rules, strict payload validation of known
 * types, unknown types kept, one terminal result, nothing after it. Each run's results are
 * handled one after another in arrival order.
 */
@Injectable()
export class ResultIngestService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('RunResults');
  private sub?: Subscription;

  constructor(
    private readonly connections: RunnerConnections,
    private readonly active: ActiveRuns,
    private readonly lifecycle: RunLifecycleService,
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

  accept(session: RunnerSession, result: RunResult): void {
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
    const sequence = this.normaliseSequence(run, result.sequence);
    if (sequence === null) {
      return;
    }
    const checked = validateResultPayload(result.type, result.data);
    if (!checked.ok) {
      this.logger.warn({ ...log, msg: `result dropped: invalid ${result.type} payload: ${checked.reason}` });
      return;
    }
    const size = Buffer.byteLength(JSON.stringify(checked.data));
    if (size > this.config.runs.maxResultBytes) {
      this.logger.warn({
        ...log,
        msg: `result dropped: data is ${size} bytes, limit ${this.config.runs.maxResultBytes}`,
      });
      return;
    }
    const usage = result.usage && usageSchema.safeParse(result.usage).success ? result.usage : null;
    if (result.usage && !usage) {
      this.logger.warn({ ...log, msg: 'usage ignored: token counts must be non-negative integers' });
    }
    if (!isKnownResultType(result.type)) {
      this.logger.warn({ ...log, msg: `unknown result type ${result.type}: persisted and ignored` });
    }
    run.seen.add(sequence);
    run.last_sequence = Math.max(run.last_sequence, sequence);
    const terminal = TERMINAL_RESULT_TYPES.includes(result.type);
    if (terminal) {
      run.ended = true;
    }
    const row: ResultView = {
      run_id: run.run_id,
      sequence,
      type: result.type,
      data: checked.data,
      usage,
      source: 'runner',
      timestamp: result.timestamp ?? null,
    };
    this.lifecycle.enqueue(run, () =>
      terminal ? this.lifecycle.finishFromRunner(run, row) : this.lifecycle.persist(run, row),
    );
  }

  /** §3.5: missing/invalid → last+1; duplicate → dropped; gaps and reordering only warned. */
  private normaliseSequence(run: ActiveRun, raw: number | undefined): number | null {
    const log = { run_id: run.run_id, sequence: raw };
    if (raw === undefined || raw === null) {
      return run.last_sequence + 1;
    }
    if (!Number.isInteger(raw) || raw <= 0) {
      this.logger.warn({ ...log, msg: `invalid sequence ${raw}; assigned ${run.last_sequence + 1}` });
      return run.last_sequence + 1;
    }
    if (run.seen.has(raw)) {
      this.logger.warn({ ...log, msg: `duplicate sequence ${raw}: result dropped` });
      return null;
    }
    if (raw > run.last_sequence + 1) {
      this.logger.warn({ ...log, msg: `sequence gap: expected ${run.last_sequence + 1}, got ${raw}` });
    } else if (raw < run.last_sequence) {
      this.logger.warn({ ...log, msg: `out-of-order sequence ${raw} after ${run.last_sequence}` });
    }
    return raw;
  }
}
