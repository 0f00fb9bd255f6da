import { Inject, Injectable, Logger } from '@nestjs/common';
import { buildSnapshot, snapshotHash, stateScopesOf, type RunScope, type StateScopes } from '@libs/authz';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import {
  STATE_LIST_LIMIT,
  StateService,
  TranscriptService,
  conversationOf,
  stateSnapshotOf,
} from '@libs/conversations';
import {
  AdmissionReadsRepository,
  type AgentEntity,
  type ConversationRef,
  type ConversationSituation,
  type JsonObject,
  type NewRun,
} from '@libs/persistence';
import { runTimeoutSeconds, type RunnerManifest } from '@libs/protocol';
import { planOf, type DeliveryContext } from '@libs/delivery';
import { RunnerDispatch, type ConnectedRunner, type RunnerSession } from '@libs/runner-gateway';
import type { RunContext } from '@libs/protocol';
import { ActiveRuns } from './active-runs';
import { AdmissionCatalog } from './admission-catalog';
import type { EventSubmission } from './event-submission';
import { buildRunContext, storedContext, type RunAccess } from './run-context.builder';
import { RunLifecycleService } from './run-lifecycle.service';
import { RunLeases } from './run-leases.service';
import { telemetry } from '@libs/telemetry';

export interface PreparedRun {
  scope: RunScope;
  access: RunAccess;
  context: RunContext;
  /** The run row as it is stored when the run starts now. */
  run: NewRun;
}

/** What a run's preparation reads of the database: its state scopes' entries and its thread's latest seq. */
export interface RunReads {
  state: Record<string, Record<string, unknown>>;
  latest_seq: number | null;
}

/**
 * A run's reads started ahead of its preparation (RunStarter.readAhead) with the agent and the run
 * scope they were started for: the preparation takes them — and their state scopes, not computed
 * again — only for the same agent entity (the catalogue's, unchanged) and the same scope; else it
 * reads again.
 */
export interface RunReadsAhead {
  agent: AgentEntity;
  /** The run scope, as JSON. */
  scope: string;
  state: StateScopes;
  reads: Promise<RunReads>;
}

export interface LiveRunner {
  session: RunnerSession;
  runner: ConnectedRunner;
}

export function scopeOf(sub: EventSubmission, agent: AgentEntity, pluginId: string): RunScope {
  return {
    agent_id: agent.agent_id,
    runner_id: agent.runner_id,
    plugin_id: pluginId,
    conversation_id: sub.conversation?.conversation_id ?? null,
    thread_id: sub.conversation?.thread_id ?? null,
    bot_id: sub.conversation?.bot_id ?? null,
    // docs/tenancy.md#runs: the agent's workspace (an event's was checked against it at the edge).
    workspace_id: sub.conversation?.workspace_id ?? agent.workspace_id ?? null,
    actor_type: sub.actor?.actor_type ?? null,
    actor_id: sub.actor?.actor_id ?? null,
    subject_type: sub.subject?.subject_type ?? null,
    subject_id: sub.subject?.subject_id ?? null,
  };
}

/**
 * Starting a run, for admission (an event that starts at once) and for the conversation
 * dispatcher (a run that waited): freeze the grants, build the context, then hand the run to
 * its runner's live session.
 */
@Injectable()
export class RunStarter {
  private readonly logger = new Logger('Admission');
  /**
   * Runs whose start is being committed, by conversation key, and whether they may pull
   * steering: a follow-up admitted in the same commit group as the start (before the run is
   * registered) can already be steered into it.
   */
  private readonly starting = new Map<string, { run_id: string; steerable: boolean }>();

  constructor(
    private readonly catalog: AdmissionCatalog,
    private readonly runners: RunnerDispatch,
    private readonly lifecycle: RunLifecycleService,
    private readonly active: ActiveRuns,
    private readonly transcript: TranscriptService,
    private readonly state: StateService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly leases: RunLeases,
    private readonly admissionReads: AdmissionReadsRepository,
  ) {}

  /**
   * The run's grants, context and row (status `running`, started now, claimed by this process:
   * the unit that starts it writes `owner_process_id` and the attempt, docs/scale-out.md#taking-a-run).
   */
  async prepare(
    runId: string,
    eventId: string,
    sub: EventSubmission,
    agent: AgentEntity,
    live: LiveRunner | undefined,
    now: number,
    /** The `performance.now()` instant the admission began (one catalogue version read per admission). */
    since?: number,
    /** The run's reads as admission started them before the agent was confirmed (readAhead). */
    ahead?: RunReadsAhead | null,
  ): Promise<PreparedRun> {
    const scope = scopeOf(sub, agent, live?.session.plugin_id ?? '');
    const access = await this.access(runId, scope, live?.runner.manifest ?? null, agent, now, since, ahead ?? null);
    const { context, deadlineAtMs } = buildRunContext(runId, eventId, sub, agent, access);
    const run: NewRun = {
      run_id: runId,
      event_id: eventId,
      agent_id: agent.agent_id,
      runner_id: agent.runner_id,
      conversation_id: scope.conversation_id,
      thread_id: scope.thread_id,
      workspace_id: scope.workspace_id,
      status: 'running',
      status_reason: null,
      error_code: null,
      retryable: null,
      context: storedContext(context) as JsonObject,
      usage: null,
      authorization: { ...access.snapshot },
      authorization_hash: snapshotHash(access.snapshot),
      created_at: now,
      started_at: now,
      finished_at: null,
      deadline_at: deadlineAtMs,
      cancel_requested_at: null,
      owner_process_id: this.leases.owner,
    };
    return { scope, access, context, run };
  }

  /** Whether admission's reads are worth starting ahead (round trips: PostgreSQL; AdmissionReadsRepository.roundTrips). */
  get readsAhead(): boolean {
    return this.admissionReads.roundTrips;
  }

  /**
   * Starts the reads `prepare` makes of the run's state and thread — they need the agent's state
   * policy and the run's scope, not the resource catalogue — with the conversation's situation, as
   * one read, so that admission can run them beside the catalogue version read (docs/benchmarks.md,
   * round 14 wt-pgc1r14). They are only reads: a preparation for another agent entity (the
   * catalogue reloaded it) or another scope reads again (RunReadsAhead).
   */
  readAhead(
    sub: EventSubmission,
    agent: AgentEntity,
    live: LiveRunner,
    c: ConversationRef,
  ): { situation: Promise<ConversationSituation>; run: RunReadsAhead; catalogVersion: Promise<number> } {
    const scope = scopeOf(sub, agent, live.session.plugin_id);
    const state = stateScopesOf(agent.state_policy, scope);
    const keys = state.scope_keys;
    // With the conversation's situation, as one read (one statement on PostgreSQL).
    const read = this.admissionReads.read(c, conversationOf(scope)!, Object.values(keys), STATE_LIST_LIMIT);
    const ahead = {
      situation: read.then((r) => r.situation),
      // The catalogue version row, read by the same statement (AdmissionReads.catalog_version).
      catalogVersion: read.then((r) =>
        r.catalog_version === undefined ? Promise.reject(new Error('no catalogue version read')) : r.catalog_version,
      ),
      run: {
        agent,
        scope: JSON.stringify(scope),
        state,
        reads: read.then((r) => ({
          state: stateSnapshotOf(keys, scope.conversation_id, r.state),
          latest_seq: r.latest_seq,
        })),
      },
    };
    // Awaited only when the admission takes them: a failure of reads not taken is not one.
    ahead.situation.catch(() => undefined);
    ahead.catalogVersion.catch(() => undefined);
    ahead.run.reads.catch(() => undefined);
    return ahead;
  }

  /** Marks a prepared run of a conversation as starting (see `starting`) until `done` settles. */
  async whileStarting<T>(prepared: PreparedRun, conversationKey: string, done: () => Promise<T>): Promise<T> {
    const entry = { run_id: prepared.run.run_id, steerable: prepared.access.snapshot.available_apis.steering_pull };
    // The first start in flight stays: a concurrent one finds it running and may steer into it.
    if (!this.starting.has(conversationKey)) {
      this.starting.set(conversationKey, entry);
    }
    try {
      return await done();
    } finally {
      if (this.starting.get(conversationKey) === entry) {
        this.starting.delete(conversationKey);
      }
    }
  }

  /**
   * The conversation's run in this process that can take steering now — active, or being
   * started — for the admission decision table; null when none.
   */
  steerableRun(conversationKey: string): string | null {
    const starting = this.starting.get(conversationKey);
    return this.active.steerableIn(conversationKey) ?? (starting?.steerable ? starting.run_id : null);
  }

  /** Whether the conversation has a run active here or being started here (it is busy). */
  busyHere(conversationKey: string): boolean {
    return this.active.inConversation(conversationKey) || this.starting.has(conversationKey);
  }

  /** Whether the run is active in this process, or being started here for the conversation. */
  isHere(runId: string, conversationKey: string): boolean {
    return this.active.get(runId) !== undefined || this.starting.get(conversationKey)?.run_id === runId;
  }

  /**
   * Registers the run as active and sends it to the runner — only on the session it was
   * prepared for: a runner that went meanwhile fails it `runner.disconnected`. `eventSeq`: the
   * event's position in the event log, as the admission unit wrote it in the stored context.
   * `attempt`: the one the start unit claimed the run with (its lease, with the owner it was
   * prepared for); null: not claimed, its writes are not fenced.
   */
  dispatch(
    prepared: PreparedRun,
    agent: AgentEntity,
    live: LiveRunner,
    eventSeq: number | null,
    attempt: number | null = null,
  ): void {
    const runId = prepared.run.run_id;
    if (eventSeq !== null) {
      prepared.context.context = { ...prepared.context.context!, event_seq: eventSeq };
    }
    const session = this.runners.target(agent.runner_id)?.session;
    const delivery = planOf(agent.delivery_policy, prepared.context.delivery as DeliveryContext);
    const lease = RunLeases.leaseOf(runId, prepared.run.owner_process_id, attempt);
    const active = this.lifecycle.start(
      runId,
      agent,
      session ?? live.session,
      prepared.access.snapshot,
      delivery,
      lease,
    );
    if (session !== live.session) {
      this.lifecycle.conclude(active, {
        status: 'failed',
        code: 'runner.disconnected',
        error: 'runner disconnected before the run was dispatched',
        retryable: true,
      });
      return;
    }
    try {
      const traceparent = telemetry.tracing.runTraceparent(runId) ?? '';
      telemetry.tracing.runStep(runId, 'dispatch', () =>
        session.send({
          run: { runner_id: agent.runner_id, runner_name: live.runner.name, context: prepared.context, traceparent },
        }),
      );
      telemetry.runDispatched(agent.runner_id, (active.admitted_at = prepared.run.created_at));
      if (telemetry.logs.enabled('log')) {
        this.logger.log({ run_id: runId, msg: `run dispatched to ${agent.runner_id}` });
      }
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

  /** Freezes the run's grants (manifest ∩ agent policy ∩ scope) and reads what the context shows of state and history. */
  private async access(
    runId: string,
    scope: RunScope,
    manifest: RunnerManifest | null,
    agent: AgentEntity,
    now: number,
    since: number | undefined,
    ahead: RunReadsAhead | null,
  ): Promise<RunAccess> {
    const timeout = runTimeoutSeconds(agent.runner_config);
    const catalog = await this.catalog.resourceCatalog(since);
    // The reads ahead (readAhead, which reads the state too: a live runner's manifest) for the same
    // agent entity and scope read what these would, by the same state scopes.
    const taken =
      ahead !== null && ahead.agent === agent && manifest !== null && ahead.scope === JSON.stringify(scope)
        ? ahead
        : null;
    const snapshot = buildSnapshot({
      run_id: runId,
      scope,
      manifest: manifest ?? { capabilities: {}, permissions: {} },
      policy: { resource: agent.resource_policy, state: agent.state_policy, delivery: agent.delivery_policy },
      catalog,
      limits: {
        max_payload_bytes: this.config.hostApi.maxPayloadBytes,
        max_state_value_bytes: 256 * 1024,
        max_storage_value_bytes: this.config.hostApi.maxStorageValueBytes,
        calls_per_second: this.config.hostApi.callsPerSecond,
        burst: this.config.hostApi.burst,
      },
      deadline_at_ms: timeout === null ? null : now + Math.round(timeout * 1000),
      state: taken?.state,
    });
    const { state, latest_seq } = await (taken
      ? taken.reads
      : this.reads(snapshot.state.scope_keys, scope, manifest !== null));
    const firstChat = snapshot.resources.models.find((m) => m.model_type === 'llm');
    const window = firstChat ? catalog.models.find((m) => m.model_id === firstChat.model_id)?.context_window : null;
    return { snapshot, state, latest_seq, model_context_window_tokens: window ?? null };
  }

  private async reads(keys: Partial<Record<string, string>>, scope: RunScope, withState: boolean): Promise<RunReads> {
    const conversation = conversationOf(scope);
    const [state, latest_seq] = await Promise.all([
      withState ? this.state.snapshot(keys, scope.conversation_id) : Promise.resolve({}),
      conversation ? this.transcript.latestSeq(conversation) : Promise.resolve(null),
    ]);
    return { state, latest_seq };
  }
}
