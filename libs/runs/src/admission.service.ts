import { hash } from 'node:crypto';
import { ProcessRegistry } from '@libs/cluster';
import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  DEFAULT_WORKSPACE,
  NOT_ACCEPTED,
  orderedUuid,
  RunsRepository,
  SteeringRepository,
  soloConversation,
  type AdmitOutcome,
  type AgentEntity,
  type ConversationRef,
  type ConversationSituation,
  type EventEntity,
  type JsonObject,
} from '@libs/persistence';
import { DomainError, parseRunnerId } from '@libs/protocol';
import { RunnerDispatch, RunnerPresence } from '@libs/runner-gateway';
import { AdmissionCatalog } from './admission-catalog';
import { eventLogRow, userTranscriptRow } from './admission-records';
import { rejectedError, unavailableError, unavailableRun } from './admission-failures';
import { conversationOf, LazyConversationRows, steeringParts } from './concurrency/admission-rows';
import { decisionTable, effectiveMode, type ConcurrencyMode } from './concurrency/concurrency';
import { routedTable, routeOf } from './concurrency/routing';
import { SIGNAL_PORT, type SignalPort } from './concurrency/signal-port';
import { redactSubmission, type EventSubmission } from './event-submission';
import { RunLifecycleService } from './run-lifecycle.service';
import { RunStarter, scopeOf, type LiveRunner, type PreparedRun, type RunReadsAhead } from './run-start';
import { telemetry } from '@libs/telemetry';
import type { Admission } from './admission';
import { quotaExceeded, WorkspaceQuotaGate } from './workspace-quotas';

export type { Admission } from './admission';

/**
 * An admission's reads of its conversation — the situation, the run's state entries and thread
 * seq — started by `AdmissionService.readAhead` with the agent as this process has it cached,
 * beside the catalogue version read instead of after it (docs/benchmarks.md, round 14
 * wt-pgc1r14). Only reads: the admission takes each when what it reads by is the same once the
 * agent is confirmed (the version read, docs/scale-out.md#admin-writes), else reads again.
 */
export interface AdmissionReadAhead {
  /** The conversation's key the situation was read by. */
  conversation_key: string;
  situation: Promise<ConversationSituation>;
  run: RunReadsAhead;
}

/** A start the unit found unprepared is prepared and submitted again, this many times at most. */
const MAX_PREPARE_ROUNDS = 4;

/**
 * Event intake (`POST /v1/events`, docs/api.md#routes), one path for every event — one without
 * a conversation is a conversation of one: dedupe, resolve the agent, build the decision table
 * from the conversation's policy, prepare the run (grants, state, transcript window, context)
 * only when it is expected to start, commit through the one admission unit
 * (RunsRepository.admit), then set going what the disposition implies: the run dispatched, a
 * waiting SteeringPull woken, the dispatcher kicked, an interrupted run cancelled.
 */
/** Retry-After of the 503 a draining process answers (docs/deployment.md#graceful-shutdown). */
const DRAINING_RETRY_AFTER_MS = 1000;

@Injectable()
export class AdmissionService {
  private readonly logger = new Logger('Admission');

  constructor(
    private readonly catalog: AdmissionCatalog,
    private readonly runs: RunsRepository,
    private readonly steering: SteeringRepository,
    private readonly runners: RunnerDispatch,
    private readonly starter: RunStarter,
    private readonly lifecycle: RunLifecycleService,
    @Inject(SIGNAL_PORT) private readonly signals: SignalPort,
    private readonly quotas: WorkspaceQuotaGate,
    private readonly presence: RunnerPresence,
    @Inject(ProcessRegistry) private readonly process: { readonly draining: boolean },
  ) {}

  /**
   * `since`: the `performance.now()` instant the admission began (before the edge's own catalogue
   * reads): every catalogue read of this admission may share one version read started after it
   * (docs/scale-out.md#admin-writes). `agent`: the event's agent as the same request already read
   * it from the catalogue (after `since`); read here when not given.
   */
  submit(
    sub: EventSubmission,
    idempotencyKey: string | null,
    since: number = performance.now(),
    agent?: AgentEntity,
    ahead?: AdmissionReadAhead | null,
  ): Promise<Admission> {
    return telemetry.tracing.inSpan('admission', { 'runnerhost.agent_id': sub.agent_id }, () =>
      this.admit(sub, idempotencyKey, since, agent, ahead ?? null),
    );
  }

  /**
   * The reads an event of a conversation is expected to make (AdmissionReadAhead), started now
   * with the agent as cached here, before the edge's catalogue reads confirm it — so they are not
   * after the version read; the same statement reads the version row, which those catalogue reads
   * then share (CatalogVersions.seed: one statement per admission, not two). Null (nothing started)
   * when the agent is not cached, the event names no conversation or another workspace, its runner
   * is not live here, or the conversation has a run here (its run is not prepared before its
   * situation is read) — and on SQLite, whose reads are synchronous calls in process: nothing to
   * overlap (RunStarter.readsAhead).
   */
  readAhead(sub: EventSubmission): AdmissionReadAhead | null {
    const conv = sub.conversation;
    if (!conv || sub.event.event_type === 'interaction.submitted' || !this.starter.readsAhead) {
      return null;
    }
    const agent = this.catalog.cached(sub.agent_id);
    const live = agent && this.runners.target(agent.runner_id);
    if (!agent || !live) {
      return null;
    }
    // The workspace as the edge fills it in (WorkspaceAdmission.derive); another is refused there.
    const workspace = agent.workspace_id ?? DEFAULT_WORKSPACE;
    if (conv.workspace_id !== undefined && conv.workspace_id !== workspace) {
      return null;
    }
    const derived = { ...sub, conversation: { ...conv, workspace_id: workspace } };
    const c = conversationOf(agent, derived);
    if (this.starter.busyHere(c.key)) {
      return null;
    }
    const startedAt = performance.now();
    const { catalogVersion, ...ahead } = this.starter.readAhead(derived, agent, live, c);
    // The version row comes with these reads: the edge's catalogue reads of this admission share it.
    this.catalog.versionRead(startedAt, catalogVersion);
    return { conversation_key: c.key, ...ahead };
  }

  private async admit(
    sub: EventSubmission,
    idempotencyKey: string | null,
    since: number,
    known: AgentEntity | undefined,
    ahead: AdmissionReadAhead | null,
  ): Promise<Admission> {
    if (this.process.draining) {
      // docs/deployment.md#graceful-shutdown: nothing is recorded; the client (or the load
      // balancer's retry) sends it to another process.
      throw new DomainError(
        'unavailable',
        'this host process is shutting down (draining) and admits no new events: send the event again (another process takes it)',
        { reason: 'host.draining', retry_after_ms: DRAINING_RETRY_AFTER_MS },
      );
    }
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
    const bodyText = JSON.stringify(sub);
    const bodyHash = hash('sha256', bodyText, 'hex');
    const previous = await this.previous(sub.event.event_id ?? null, idempotencyKey);
    const readmit = previous !== null && NOT_ACCEPTED.includes(previous.disposition) && previous.body_hash === bodyHash;
    if (previous && !readmit) {
      return this.duplicate(previous, bodyHash, sub.agent_id);
    }
    const eventId = previous?.event_id ?? sub.event.event_id ?? orderedUuid();
    const agent =
      known?.agent_id === sub.agent_id
        ? known
        : await this.catalog.agent(sub.agent_id, since).catch((e: unknown) => {
            throw e instanceof DomainError
              ? new DomainError(e.code, e.message, { ...e.details, field: 'agent_id' })
              : e;
          });
    parseRunnerId(agent.runner_id);
    // The workspace's admission quotas (docs/tenancy.md#quotas), after the duplicate check: a
    // duplicate answers its original admission and never spends a token.
    const workspace = agent.workspace_id ?? DEFAULT_WORKSPACE;
    this.quotas.admit(workspace);
    // Counted over the database by the unit (every process's running runs), race-free.
    const activeQuota = this.quotas.activeQuota(workspace);
    if (sub.conversation) {
      await this.quotas.admitFollowUp(workspace);
    }
    const live = this.runners.target(agent.runner_id);
    // docs/scale-out.md#routing: a runner held only by another live process gets the run as a
    // waiting run (its holder's dispatcher claims and starts it); held nowhere, it fails at once.
    const route = routeOf(live !== undefined, !live && (await this.presence.heldElsewhere(agent.runner_id)));
    const now = Date.now();
    const runId = orderedUuid();
    const redacted = redactSubmission(sub, bodyText);
    const event: EventEntity = {
      event_id: eventId,
      agent_id: agent.agent_id,
      event_type: sub.event.event_type,
      conversation_id: sub.conversation?.conversation_id ?? null,
      thread_id: sub.conversation?.thread_id ?? null,
      idempotency_key: idempotencyKey,
      body_hash: bodyHash,
      payload: redacted as JsonObject,
      disposition: 'started',
      run_id: runId,
      received_at: now,
    };
    const scope = scopeOf(sub, agent, live?.session.plugin_id ?? '');
    const log = eventLogRow(eventId, sub, redacted, scope, runId, now);
    const user = userTranscriptRow(eventId, sub, redacted, scope, now);
    const solo = !sub.conversation && route === 'elsewhere';
    const c = sub.conversation
      ? conversationOf(agent, sub)
      : solo
        ? soloConversation(runId, agent.agent_id, agent.runner_id, agent.workspace_id ?? null)
        : null;
    // The runner's steering capability: its live manifest here, its stored one when another process
    // holds it (a conversation of one is never busy: no mode to choose).
    const steers = live
      ? live.runner.manifest.capabilities?.steering === true
      : c !== null && !solo && route === 'elsewhere' && (await this.presence.steersElsewhere(agent.runner_id));
    const mode = c ? this.modeOf(sub, agent, steers) : null;
    // Decide first: a conversation that looks busy is not prepared for (the unit decides again);
    // a run routed to another process is prepared there, when it starts.
    const prepare = () => this.starter.prepare(runId, eventId, sub, agent, live, now, since, ahead?.run);
    let prepared = route === 'elsewhere' ? null : c ? await this.preparedIfFree(c, prepare, ahead) : await prepare();
    // A busy conversation's run may be active in another process: steered into from here too.
    const steerElsewhere = c && !prepared && mode === 'steer' ? await this.steerableElsewhere(c) : null;
    // A steered follow-up's item carries its admission's trace context (docs/observability.md#traces).
    const traceparent = c ? telemetry.tracing.activeTraceparent() : null;
    const parts = steeringParts(eventId, sub, agent.runner_id, now, traceparent);
    let outcome: AdmitOutcome | undefined;
    for (let round = 0; round < MAX_PREPARE_ROUNDS; round++) {
      const submit = () => {
        const failed = prepared && !live ? unavailableRun(prepared.run) : null;
        return this.runs.admit({
          event,
          readmit,
          log,
          user,
          run: failed?.run ?? prepared?.run ?? null,
          terminal: failed?.terminal ?? null,
          active_quota: activeQuota,
          // The table is built when the unit is submitted: it sees every run started before it.
          // The steering item and the submission are built only if the unit steers or queues the event.
          conversation:
            c &&
            new LazyConversationRows(
              c,
              routedTable(
                decisionTable(
                  mode!,
                  sub.event.event_type === 'message.received',
                  this.starter.steerableRun(c.key) ?? steerElsewhere,
                ),
                route,
              ),
              parts,
              solo,
            ),
        });
      };
      outcome = await telemetry.tracing.inSpan('writer commit', {}, () =>
        c && prepared ? this.starter.whileStarting(prepared, c.key, submit) : submit(),
      );
      if (outcome.admitted || outcome.existing !== null || outcome.active !== undefined) {
        break;
      }
      // The conversation was free after all: prepare the run and submit again (reading afresh).
      ahead = null;
      prepared = await prepare();
    }
    if (outcome && !outcome.admitted && outcome.active !== undefined && activeQuota) {
      throw quotaExceeded(workspace, 'max_active_runs', activeQuota.max, 1000);
    }
    if (!outcome?.admitted) {
      if (!outcome?.existing) {
        throw new DomainError(
          'unavailable',
          'the conversation changed under admission too often; send the event again',
          {
            event_id: eventId,
          },
        );
      }
      // A concurrent duplicate won the insert: answer like it.
      return this.duplicate(outcome.existing, bodyHash, sub.agent_id);
    }
    return this.afterCommit(outcome, event, agent, prepared, live, c, mode);
  }

  /** What the committed disposition sets going, and the answer. */
  private afterCommit(
    outcome: Extract<AdmitOutcome, { admitted: true }>,
    event: EventEntity,
    agent: AgentEntity,
    prepared: PreparedRun | null,
    live: LiveRunner | undefined,
    c: ConversationRef | null,
    mode: ConcurrencyMode | null,
  ): Admission {
    telemetry.eventAdmitted(outcome.disposition, agent.runner_id);
    if (outcome.disposition === 'started' || outcome.disposition === 'queued') {
      telemetry.tracing.runStarted(outcome.run_id!, {
        'runnerhost.runner_id': agent.runner_id,
        'runnerhost.agent_id': agent.agent_id,
      });
    }
    const base = { event_id: event.event_id, run_id: outcome.run_id, replayed: false };
    switch (outcome.disposition) {
      case 'started':
        this.starter.dispatch(prepared!, agent, live!, outcome.event_seq, outcome.attempt);
        // The 202's body, keys in the order of `{ ...base, disposition }` (a spread with more keys is a
        // slow path of V8, docs/benchmarks.md#host-cpu-per-run-round-9-wt-cpu9).
        return { event_id: base.event_id, run_id: base.run_id, replayed: false, disposition: 'started' };
      case 'failed': {
        // No runner to take the run: recorded, failed `runner.unavailable` with its terminal
        // result (its stream ends like any other); the caller gets a retryable 503.
        const reason = unavailableRun(prepared!.run).reason;
        telemetry.runEnded(agent.runner_id, 'failed', event.received_at);
        this.logger.warn({ run_id: outcome.run_id, msg: `run failed at admission: ${reason}` });
        throw unavailableError(event.event_id, outcome.run_id!, reason);
      }
      case 'rejected':
        throw rejectedError(event.event_id, outcome.run_id);
      case 'steered':
        this.signals.publish({ kind: 'steering', run_id: outcome.run_id! });
        telemetry.steered(outcome.position ?? 0);
        telemetry.tracing.steeredInto(outcome.run_id!);
        return { ...base, disposition: 'steered', position: outcome.position ?? undefined };
      case 'queued': {
        // Readers may follow the run before it starts.
        this.lifecycle.openWaiting(outcome.run_id!);
        const interrupted = mode === 'interrupt' ? outcome.running_run_id : null;
        if (interrupted) {
          this.lifecycle.interrupt(interrupted, `interrupted by event ${event.event_id}`);
        }
        this.signals.publish({ kind: 'conversation', key: c!.key });
        return { ...base, disposition: 'queued', ...(interrupted ? { interrupted_run_id: interrupted } : {}) };
      }
    }
  }

  private modeOf(sub: EventSubmission, agent: AgentEntity, steers: boolean): ConcurrencyMode {
    const agentMode = (agent.concurrency_policy as { mode?: ConcurrencyMode }).mode;
    return effectiveMode(sub.concurrency, agentMode, steers);
  }

  /**
   * On a shared bus (docs/scale-out.md#everything-from-anywhere): the conversation's running run
   * when it is active in another process and its runner pulls steering (its frozen snapshot says
   * so), read from the database; the admission unit steers into it only if it is still the
   * running run under the conversation's lock, and its owner's pull is woken by the `steering`
   * signal (or its poll). Null in one process, or when the run is here (answered from memory alone,
   * as in one process: a run of this process that is ending takes no more steering).
   */
  private async steerableElsewhere(c: ConversationRef): Promise<string | null> {
    if (this.signals.pollMs === undefined) {
      return null;
    }
    const running = (await this.steering.situation(c)).running_run_id;
    if (running === null || this.starter.isHere(running, c.key)) {
      return null;
    }
    const stored = await this.runs.authorization(running);
    const apis = (stored?.authorization as { available_apis?: { steering_pull?: unknown } } | null)?.available_apis;
    return apis?.steering_pull === true ? running : null;
  }

  /**
   * The run prepared when the conversation looks free (looksFree), else null. With no run of the
   * conversation here it is prepared while the look is read — its reads (state, thread seq) beside
   * the situation's, one pool round trip in series instead of two on the admission's path — and
   * dropped when the conversation looks busy (its reads spent: a busy conversation is the rarer
   * case, and one whose run is here is never prepared for).
   */
  private async preparedIfFree(
    c: ConversationRef,
    prepare: () => Promise<PreparedRun>,
    ahead: AdmissionReadAhead | null,
  ): Promise<PreparedRun | null> {
    if (this.starter.busyHere(c.key)) {
      return (await this.looksFree(c, null)) ? prepare() : null;
    }
    const early = prepare();
    // Awaited below only when the conversation looks free: a failure of a run not wanted is not one.
    early.catch(() => undefined);
    return (await this.looksFree(c, ahead)) ? early : null;
  }

  /**
   * Nothing running, nothing waiting (read before the commit; the unit decides under the lock) —
   * the situation read ahead when it was read by this conversation's key.
   */
  private async looksFree(c: ConversationRef, ahead: AdmissionReadAhead | null): Promise<boolean> {
    const s = await (ahead?.conversation_key === c.key ? ahead.situation : this.steering.situation(c));
    return s.running_run_id === null && s.waiting === 0;
  }

  /**
   * The answer to an event whose event_id or Idempotency-Key was used before. The 409 of another
   * body names the original event only when it is of the same agent: keys and event ids are
   * host-wide, and an agent belongs to one workspace, so another agent's event may be another
   * workspace's (docs/tenancy.md).
   */
  private duplicate(previous: EventEntity, bodyHash: string, agentId: string): Admission {
    if (previous.body_hash !== bodyHash) {
      throw new DomainError(
        'conflict',
        'this event_id / Idempotency-Key was already used with a different body',
        previous.agent_id === agentId ? { event_id: previous.event_id } : {},
      );
    }
    if (previous.disposition === 'failed') {
      // A concurrent retry of an event that failed at admission, still failing: the same answer.
      throw unavailableError(previous.event_id, previous.run_id ?? '', 'the runner is not connected');
    }
    if (previous.disposition === 'rejected') {
      throw rejectedError(previous.event_id, previous.run_id);
    }
    return { event_id: previous.event_id, disposition: previous.disposition, run_id: previous.run_id, replayed: true };
  }

  private async previous(eventId: string | null, key: string | null): Promise<EventEntity | null> {
    return (
      (key ? await this.runs.getEventByIdempotencyKey(key) : null) ??
      (eventId ? await this.runs.getEvent(eventId) : null)
    );
  }
}
