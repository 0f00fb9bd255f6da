import { Inject, Injectable } from '@nestjs/common';
import {
  SteeringRepository,
  conversationKey,
  queuedRunRow,
  type AgentEntity,
  type ConversationRef,
  type EventEntity,
  type JsonObject,
  type NewEventLog,
  type NewTranscriptRow,
} from '@libs/persistence';
import { ActiveRuns } from '../active-runs';
import type { Admission } from '../admission';
import { rejectedError, unavailableError, unavailableRun } from '../admission-failures';
import type { EventSubmission } from '../event-submission';
import { RunStreamBus } from '../run-stream.bus';
import { RunStarter, type LiveRunner, type PreparedRun } from '../run-start';
import { decideDisposition, effectiveMode, type ConcurrencyMode } from './concurrency';
import { SIGNAL_PORT, type SignalPort } from './signal-port';
import { telemetry } from '@libs/telemetry';

export interface ConversationAdmitInput {
  sub: EventSubmission;
  agent: AgentEntity;
  event: EventEntity;
  prepared: PreparedRun;
  live: LiveRunner | undefined;
  log: NewEventLog;
  user: NewTranscriptRow | null;
  readmit: boolean;
}

export type ConversationAdmitResult =
  { admitted: true; admission: Admission } | { admitted: false; existing: EventEntity };

export function conversationOf(agent: AgentEntity, sub: EventSubmission): ConversationRef {
  const conv = sub.conversation!;
  const thread = conv.thread_id ?? null;
  const workspace = conv.workspace_id ?? null;
  return {
    key: conversationKey(agent.agent_id, workspace, conv.conversation_id, thread),
    agent_id: agent.agent_id,
    runner_id: agent.runner_id,
    workspace_id: workspace,
    conversation_id: conv.conversation_id,
    thread_id: thread,
  };
}

/** The SteeringInputItem a runner pulls (docs/protocol.md#steering-pull), with the whole input. */
export function steeringItem(
  eventId: string,
  sub: EventSubmission,
  runnerId: string,
  runId: string,
  position: number,
  now: number,
  traceparent: string | null = null,
): JsonObject {
  const e = sub.event;
  const c = sub.conversation;
  return JSON.parse(
    JSON.stringify({
      item_id: eventId,
      claimed_run_id: runId,
      runner_id: runnerId,
      claimed_at: Math.floor(now / 1000),
      position,
      event: {
        event_id: eventId,
        event_type: e.event_type,
        event_time: e.event_time,
        source: e.source,
        source_event_type: e.source_event_type,
        raw_ref: e.raw_ref,
        data: e.data ?? {},
      },
      conversation: c
        ? { conversation_id: c.conversation_id, thread_id: c.thread_id, bot_id: c.bot_id, workspace_id: c.workspace_id }
        : null,
      actor: sub.actor ?? null,
      subject: sub.subject ?? null,
      input: sub.input,
      // The follow-up's trace context when traces are on (proto/runnerhost/v1/host_api.proto, SteeringPullResponse).
      ...(traceparent ? { traceparent } : {}),
    }),
  ) as JsonObject;
}

/**
 * Admission of an event of a conversation (docs/conversations-and-steering.md): the conversation's
 * lock, its policy and the writes of the disposition in one commit (SteeringRepository.admit); then
 * what the disposition sets going — the run dispatched, a waiting SteeringPull woken, the
 * dispatcher kicked, an interrupted run cancelled — through the signal port.
 */
@Injectable()
export class ConversationAdmission {
  constructor(
    private readonly steering: SteeringRepository,
    private readonly active: ActiveRuns,
    private readonly starter: RunStarter,
    private readonly bus: RunStreamBus,
    @Inject(SIGNAL_PORT) private readonly signals: SignalPort,
  ) {}

  async admit(i: ConversationAdmitInput): Promise<ConversationAdmitResult> {
    const { sub, agent, event, prepared, live } = i;
    const c = conversationOf(agent, sub);
    const agentMode = (agent.concurrency_policy as { mode?: ConcurrencyMode }).mode;
    const mode = effectiveMode(sub.concurrency, agentMode, live?.runner.manifest.capabilities?.steering === true);
    const isMessage = sub.event.event_type === 'message.received';
    const canSteerInto = (runId: string) => {
      const run = this.active.get(runId);
      const steerable = run
        ? !run.ended && run.snapshot.available_apis.steering_pull
        : this.starter.startingSteerable(runId);
      return isMessage && steerable;
    };
    const stored = prepared.run.context as { context: Record<string, unknown> };
    const failed = unavailableRun(prepared.run);
    const now = event.received_at;
    // A steered follow-up's item carries its admission's trace context (docs/observability.md#traces).
    const traceparent = telemetry.tracing.activeTraceparent();
    const admitted = telemetry.tracing.inSpan('writer commit', {}, () =>
      this.steering.admit({
        conversation: c,
        event,
        readmit: i.readmit,
        decide: (s) => decideDisposition(mode, s, canSteerInto),
        log: i.log,
        user: i.user,
        start: live
          ? {
              run: prepared.run,
              contextAt: (event_seq) => ({ ...stored, context: { ...stored.context, event_seq } }),
            }
          : null,
        unavailable: { run: failed.run, terminal: failed.terminal },
        queuedRun: queuedRunRow(prepared.run.run_id, event.event_id, c, now),
        item: (runId, position) => steeringItem(event.event_id, sub, agent.runner_id, runId, position, now, traceparent),
        submission: sub as unknown as JsonObject,
      }),
    );
    // Until it is dispatched (registered active), the run this event may start can take follow-ups.
    const outcome = await this.starter.whileStarting(prepared, admitted);
    if (!outcome.admitted) {
      return outcome;
    }
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
        prepared.context.context = { ...prepared.context.context!, event_seq: outcome.event_seq };
        this.starter.dispatch(prepared, agent, live!);
        return { admitted: true, admission: { ...base, disposition: 'started' } };
      case 'failed':
        telemetry.runEnded(agent.runner_id, 'failed', now);
        throw unavailableError(event.event_id, outcome.run_id!, failed.reason);
      case 'rejected':
        throw rejectedError(event.event_id, outcome.run_id);
      case 'steered':
        this.signals.publish({ kind: 'steering', run_id: outcome.run_id! });
        telemetry.steered(outcome.position ?? 0);
        telemetry.tracing.steeredInto(outcome.run_id!);
        return {
          admitted: true,
          admission: { ...base, disposition: 'steered', position: outcome.position ?? undefined },
        };
      case 'queued': {
        // Readers may follow the run before it starts.
        this.bus.open(outcome.run_id!);
        const interrupted = mode === 'interrupt' ? outcome.running_run_id : null;
        if (interrupted) {
          this.signals.publish({
            kind: 'cancel',
            run_id: interrupted,
            reason: `interrupted by event ${event.event_id}`,
          });
        }
        this.signals.publish({ kind: 'conversation', key: c.key });
        return {
          admitted: true,
          admission: { ...base, disposition: 'queued', ...(interrupted ? { interrupted_run_id: interrupted } : {}) },
        };
      }
    }
  }
}
