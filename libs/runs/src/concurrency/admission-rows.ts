/**
 * What admission writes of an event of a conversation (docs/conversations-and-steering.md): its
 * conversation and the steering item a runner pulls. Pure: the admission unit
 * (AdmissionService → RunsRepository.admit) decides and writes.
 */
import {
  conversationKey,
  type AgentEntity,
  type ConversationRef,
  type ConversationRows,
  type DecisionTable,
  type JsonObject,
} from '@libs/persistence';
import type { SteeringItem } from '@libs/protocol';
import type { EventSubmission } from '../event-submission';

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

/**
 * The SteeringInputItem a runner pulls (docs/protocol.md#steering-pull), with the whole input;
 * its `claimed_run_id` and `position` are set by the admission unit, which knows them. Built as the
 * protocol's `SteeringItem` (checked by the compiler here, where it is produced), so a pull only
 * confirms its shape cheaply (`steeringItemsOf`).
 */
export function steeringItem(
  eventId: string,
  sub: EventSubmission,
  runnerId: string,
  now: number,
  traceparent: string | null = null,
): JsonObject {
  const e = sub.event;
  const c = sub.conversation;
  return JSON.parse(
    JSON.stringify({
      item_id: eventId,
      claimed_run_id: '',
      runner_id: runnerId,
      claimed_at: Math.floor(now / 1000),
      position: 0,
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
    } satisfies SteeringItem),
  ) as JsonObject;
}

/**
 * What a steered or queued event stores besides its rows — its steering item and its submission —
 * as lazy properties: the admission unit reads them only when it steers or queues the event, so
 * an event that starts a run (most of them) never builds them (docs/benchmarks.md#host-cpu-per-run-outside-the-database).
 * Each is built once, on first read. Do not spread the result: that reads (builds) both.
 */
export function steeringParts(
  eventId: string,
  sub: EventSubmission,
  runnerId: string,
  now: number,
  traceparent: string | null,
): SteeringParts {
  return new SteeringParts(eventId, sub, runnerId, now, traceparent);
}

/**
 * `steeringParts`' lazy properties as a class: its getters are its prototype's. An object
 * literal's `get x()` defines an accessor on each object it makes, and V8 allocates each accessor
 * pair in the old generation, where it stays a root for every young-generation GC until the next
 * full GC: it kept the getters' closures — the admission's whole scope, its prepared run included —
 * alive through the scavenges after the admission (docs/benchmarks.md "Ended runs kept for the
 * scavenger: accessor pairs of object literals (round 16, wt-gc16b)").
 */
export class SteeringParts {
  #item: JsonObject | undefined;
  #submission: JsonObject | undefined;

  constructor(
    private readonly eventId: string,
    private readonly sub: EventSubmission,
    private readonly runnerId: string,
    private readonly now: number,
    private readonly traceparent: string | null,
  ) {}

  get item(): JsonObject {
    return (this.#item ??= steeringItem(this.eventId, this.sub, this.runnerId, this.now, this.traceparent));
  }

  get submission(): JsonObject {
    return (this.#submission ??= { ...this.sub } as JsonObject);
  }
}

/**
 * The admission unit's conversation rows (`ConversationRows`) with the steering parts read
 * through: built only if the unit steers or queues the event. A class for the same reason as
 * `SteeringParts` (no accessor pair per admission).
 */
export class LazyConversationRows implements ConversationRows {
  constructor(
    readonly ref: ConversationRef,
    readonly table: DecisionTable,
    private readonly parts: SteeringParts,
    readonly of_one: boolean,
  ) {}

  get item(): JsonObject {
    return this.parts.item;
  }

  get submission(): JsonObject {
    return this.parts.submission;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A waiting run's event submission as the admission unit stored it (`{ ...sub }`, checked at the
 * HTTP edge when it was admitted): the fields a start needs are confirmed before it is used as
 * one; false for a row that does not hold one (the waiting run then fails).
 */
export function isStoredSubmission(stored: unknown): stored is EventSubmission {
  if (!isObject(stored) || typeof stored.agent_id !== 'string') {
    return false;
  }
  const { event, input } = stored;
  return isObject(event) && typeof event.event_type === 'string' && typeof event.source === 'string' && isObject(input);
}
