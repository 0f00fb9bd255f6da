import { createHash, randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { buildSnapshot, snapshotHash, type RunScope } from '@libs/authz';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { StateService, TranscriptService } from '@libs/conversations';
import { RunsRepository, type AgentEntity, type EventEntity, type JsonObject, type NewRun } from '@libs/persistence';
import { DomainError, parseRunnerId, runTimeoutSeconds, type RunnerManifest } from '@libs/protocol';
import { RunnerDispatch } from '@libs/runner-gateway';
import { AdmissionCatalog } from './admission-catalog';
import { eventLogRow, userTranscriptRow } from './admission-records';
import { redactSubmission, type EventSubmission } from './event-submission';
import { buildRunContext, contextJson, type RunAccess } from './run-context.builder';
import { RunLifecycleService, verdictResult } from './run-lifecycle.service';

export interface Admission {
  event_id: string;
  disposition: string;
  run_id: string | null;
  /** True when this answers a duplicate of an event already accepted. */
  replayed: boolean;
}

/** Event intake (SPEC §12 `POST /v1/events`): dedupe, resolve the agent, freeze grants, record, dispatch. */
@Injectable()
export class AdmissionService {
  private readonly logger = new Logger('Admission');

  constructor(
    private readonly catalog: AdmissionCatalog,
    private readonly runs: RunsRepository,
    private readonly dispatch: RunnerDispatch,
    private readonly lifecycle: RunLifecycleService,
    private readonly transcript: TranscriptService,
    private readonly state: StateService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async submit(sub: EventSubmission, idempotencyKey: string | null): Promise<Admission> {
    if (
      sub.event.event_type === 'message.received' &&
      !sub.input.text &&
      !sub.input.contents?.length &&
      !sub.input.attachments?.length
    ) {
      throw new DomainError('invalid_argument', 'input: a message.received event needs text, contents or attachments', {
        field: 'input',
      });
    }
    const bodyHash = createHash('sha256').update(JSON.stringify(sub)).digest('hex');
    const previous = await this.previous(sub.event.event_id ?? null, idempotencyKey);
    // An event whose runner was unavailable was not accepted: the same event may be retried.
    const readmit = previous !== null && previous.disposition === 'failed' && previous.body_hash === bodyHash;
    if (previous && !readmit) {
      return this.duplicate(previous, bodyHash);
    }
    const eventId = previous?.event_id ?? sub.event.event_id ?? randomUUID();
    const agent = await this.catalog.agent(sub.agent_id).catch((e: unknown) => {
      throw e instanceof DomainError ? new DomainError(e.code, e.message, { ...e.details, field: 'agent_id' }) : e;
    });
    parseRunnerId(agent.runner_id);
    const live = this.dispatch.target(agent.runner_id);
    const now = Date.now();
    const runId = randomUUID();
    const event: EventEntity = {
      event_id: eventId,
      agent_id: agent.agent_id,
      event_type: sub.event.event_type,
      conversation_id: sub.conversation?.conversation_id ?? null,
      thread_id: sub.conversation?.thread_id ?? null,
      idempotency_key: idempotencyKey,
      body_hash: bodyHash,
      payload: redactSubmission(sub) as JsonObject,
      disposition: live ? 'started' : 'failed',
      run_id: runId,
      received_at: now,
    };
    const scope = this.scopeOf(sub, agent, live?.session.plugin_id ?? '');
    const access = await this.access(runId, scope, live?.runner.manifest ?? null, agent, now);
    const { context, deadlineAtMs } = buildRunContext(runId, eventId, sub, agent, access);
    const run = this.runRow(runId, event, agent, contextJson(context), now, deadlineAtMs, access);
    const logRow = eventLogRow(eventId, sub, scope, runId, now);
    if (!live) {
      return this.failUnavailable(event, run, logRow, readmit, bodyHash);
    }
    const stored = run.context as { context: Record<string, unknown> };
    const outcome = await this.runs.admit({
      event,
      run,
      log: logRow,
      user: userTranscriptRow(eventId, sub, agent.agent_id, now),
      terminal: null,
      readmit,
      // The event's position in the event log (the EventPage cursor), known once its row is written.
      contextAt: (event_seq) => ({ ...stored, context: { ...stored.context, event_seq } }),
    });
    if (!outcome.admitted) {
      // A concurrent duplicate won the insert: answer like it.
      return this.duplicate(outcome.existing, bodyHash);
    }
    context.context = { ...context.context!, event_seq: outcome.event_seq };
    // Between the check above and now the runner may have gone: dispatch only on a live session.
    const session = this.dispatch.target(agent.runner_id)?.session;
    const active = this.lifecycle.start(runId, agent, session ?? live.session, access.snapshot);
    if (session !== live.session) {
      this.lifecycle.conclude(active, {
        status: 'failed',
        code: 'runner.disconnected',
        error: 'runner disconnected before the run was dispatched',
        retryable: true,
      });
    } else {
      try {
        session.send({ run: { runner_id: agent.runner_id, runner_name: live.runner.name, context } });
        this.logger.log({ run_id: runId, msg: `run dispatched to ${agent.runner_id}` });
      } catch (e) {
        // One run's message that cannot be sent fails that run, never the plugin's stream.
        this.logger.error({ run_id: runId, msg: `run not dispatched: ${e instanceof Error ? e.message : String(e)}` });
        this.lifecycle.conclude(active, {
          status: 'failed',
          code: 'host.dispatch_failed',
          error: 'the host could not send the run to its runner',
          retryable: false,
        });
      }
    }
    return { event_id: eventId, disposition: 'started', run_id: runId, replayed: false };
  }

  private duplicate(previous: EventEntity, bodyHash: string): Admission {
    if (previous.body_hash !== bodyHash) {
      throw new DomainError('conflict', 'this event_id / Idempotency-Key was already used with a different body', {
        event_id: previous.event_id,
      });
    }
    if (previous.disposition === 'failed') {
      // A concurrent retry of an event that failed at admission, still failing: the same answer.
      throw this.unavailable(previous.event_id, previous.run_id ?? '', 'the runner is not connected');
    }
    return { event_id: previous.event_id, disposition: previous.disposition, run_id: previous.run_id, replayed: true };
  }

  /**
   * No runner to take the run: the event and its run are recorded, the run failed
   * `runner.unavailable` with its terminal result (its stream ends like any other), and the
   * caller gets a retryable 503. The same event may be sent again.
   */
  private async failUnavailable(
    event: EventEntity,
    run: NewRun,
    logRow: ReturnType<typeof eventLogRow>,
    readmit: boolean,
    bodyHash: string,
  ): Promise<Admission> {
    const reason = `runner ${run.runner_id} is not connected`;
    const terminal = verdictResult(run.run_id, 1, {
      status: 'failed',
      code: 'runner.unavailable',
      error: reason,
      retryable: true,
    });
    const outcome = await this.runs.admit({
      event,
      run: {
        ...run,
        status: 'failed',
        status_reason: reason,
        error_code: 'runner.unavailable',
        retryable: true,
        finished_at: run.created_at,
      },
      log: { ...logRow, metadata: { ...logRow.metadata, disposition: 'failed', error_code: 'runner.unavailable' } },
      user: null,
      terminal: { ...terminal, data: terminal.data as JsonObject, usage: null, created_at: run.created_at },
      readmit,
    });
    if (!outcome.admitted) {
      return this.duplicate(outcome.existing, bodyHash);
    }
    this.logger.warn({ run_id: run.run_id, msg: `run failed at admission: ${reason}` });
    throw this.unavailable(event.event_id, run.run_id, reason);
  }

  private unavailable(eventId: string, runId: string, reason: string): DomainError {
    return new DomainError('unavailable', `${reason}; the event was recorded and its run failed (runner.unavailable)`, {
      event_id: eventId,
      run_id: runId,
      error_code: 'runner.unavailable',
    });
  }

  private async previous(eventId: string | null, key: string | null): Promise<EventEntity | null> {
    return (
      (key ? await this.runs.getEventByIdempotencyKey(key) : null) ??
      (eventId ? await this.runs.getEvent(eventId) : null)
    );
  }

  private scopeOf(sub: EventSubmission, agent: AgentEntity, pluginId: string): RunScope {
    return {
      agent_id: agent.agent_id,
      runner_id: agent.runner_id,
      plugin_id: pluginId,
      conversation_id: sub.conversation?.conversation_id ?? null,
      thread_id: sub.conversation?.thread_id ?? null,
      bot_id: sub.conversation?.bot_id ?? null,
      workspace_id: sub.conversation?.workspace_id ?? null,
      actor_type: sub.actor?.actor_type ?? null,
      actor_id: sub.actor?.actor_id ?? null,
      subject_type: sub.subject?.subject_type ?? null,
      subject_id: sub.subject?.subject_id ?? null,
    };
  }

  /** Freezes the run's grants (manifest ∩ agent policy ∩ scope) and reads what the context shows of state and history. */
  private async access(
    runId: string,
    scope: RunScope,
    manifest: RunnerManifest | null,
    agent: AgentEntity,
    now: number,
  ): Promise<RunAccess> {
    const timeout = runTimeoutSeconds(agent.runner_config);
    const catalog = await this.catalog.resourceCatalog();
    const snapshot = buildSnapshot({
      run_id: runId,
      scope,
      manifest: manifest ?? { capabilities: {}, permissions: {} },
      policy: { resource: agent.resource_policy, state: agent.state_policy },
      catalog,
      limits: {
        max_payload_bytes: this.config.hostApi.maxPayloadBytes,
        max_state_value_bytes: 256 * 1024,
        max_storage_value_bytes: this.config.hostApi.maxStorageValueBytes,
        calls_per_second: this.config.hostApi.callsPerSecond,
        burst: this.config.hostApi.burst,
      },
      deadline_at_ms: timeout === null ? null : now + Math.round(timeout * 1000),
    });
    const [state, latest_seq] = await Promise.all([
      manifest ? this.state.snapshot(snapshot.state.scope_keys, scope.conversation_id) : Promise.resolve({}),
      scope.conversation_id ? this.transcript.latestSeq(scope.conversation_id, scope.thread_id) : Promise.resolve(null),
    ]);
    const firstChat = snapshot.resources.models.find((m) => m.model_type === 'llm');
    const window = firstChat ? catalog.models.find((m) => m.model_id === firstChat.model_id)?.context_window : null;
    return { snapshot, state, latest_seq, model_context_window_tokens: window ?? null };
  }

  private runRow(
    runId: string,
    event: EventEntity,
    agent: AgentEntity,
    context: Record<string, unknown>,
    now: number,
    deadline: number | null,
    access: RunAccess,
  ): NewRun {
    return {
      run_id: runId,
      event_id: event.event_id,
      agent_id: agent.agent_id,
      runner_id: agent.runner_id,
      conversation_id: event.conversation_id,
      thread_id: event.thread_id,
      status: 'running',
      status_reason: null,
      error_code: null,
      retryable: null,
      context: context as JsonObject,
      usage: null,
      authorization: access.snapshot as unknown as JsonObject,
      authorization_hash: snapshotHash(access.snapshot),
      created_at: now,
      started_at: now,
      finished_at: null,
      deadline_at: deadline,
      cancel_requested_at: null,
    };
  }
}
