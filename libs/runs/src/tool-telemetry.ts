import { Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { ToolsService, type ToolProgressEvent } from '@libs/resources';
import { ActiveRuns } from './active-runs';
import { RunSteps } from './run-steps';
import { RunStreamBus } from './run-stream.bus';

/** The live-only result type of a tool's progress report. */
export const TOOL_PROGRESS_TYPE = 'tool.call.progress';

/**
 * Forwards the progress reports of tools in flight (MCP progress notifications, task statuses)
 * to the run's live readers as `tool.call.progress` telemetry. Not persisted and without a
 * sequence of its own (the runner owns the result sequence); queued behind the run's earlier
 * results so it never overtakes one, and dropped once the run ended.
 */
@Injectable()
export class ToolTelemetryForwarder implements OnModuleInit, OnModuleDestroy {
  private sub?: Subscription;

  constructor(
    private readonly tools: ToolsService,
    private readonly active: ActiveRuns,
    private readonly steps: RunSteps,
    private readonly bus: RunStreamBus,
  ) {}

  onModuleInit(): void {
    this.sub = this.tools.progress$.subscribe((e) => this.forward(e));
  }

  onModuleDestroy(): void {
    this.sub?.unsubscribe();
  }

  private forward(e: ToolProgressEvent): void {
    const run = this.active.get(e.run_id);
    if (!run || run.ended) {
      return;
    }
    const { run_id, ...data } = e;
    this.steps.enqueue(run, () => {
      if (!run.ended) {
        this.bus.publish({
          run_id,
          sequence: run.last_sequence,
          type: TOOL_PROGRESS_TYPE,
          data: { ...data },
          usage: null,
          source: 'host',
          timestamp: Math.floor(Date.now() / 1000),
          ephemeral: true,
        });
      }
      return Promise.resolve();
    });
  }
}
