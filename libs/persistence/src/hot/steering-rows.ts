/** Conversations and their steering items as the hot path reads them (docs/conversations-and-steering.md). */
import type { JsonObject } from '../entities';
import { SQL } from './hot-sql';
import { STEERING_SQL } from './steering-sql';
import { one, type Unit } from './unit';

/**
 * One conversation: agent + workspace + conversation_id + thread_id, and the runner its agent
 * binds. A missing workspace is a workspace of its own: it matches only a missing workspace.
 */
export interface ConversationRef {
  /** Canonical key of the four ids (see conversationKey). */
  key: string;
  agent_id: string;
  runner_id: string;
  workspace_id: string | null;
  conversation_id: string;
  thread_id: string | null;
}

/**
 * The key of a conversation for concurrency and steering: the steering items' `conversation_key`,
 * the conversation lock and the dispatcher's signal. The workspace stays `null` when missing, so
 * it never equals a named workspace (the empty name included).
 */
export function conversationKey(
  agentId: string,
  workspaceId: string | null,
  conversationId: string,
  threadId: string | null,
): string {
  return JSON.stringify([agentId, workspaceId, conversationId, threadId ?? '']);
}

/** What admission sees of a conversation, under its lock. */
export interface ConversationSituation {
  running_run_id: string | null;
  /** Items queued on the running run and not pulled yet. */
  queued_on_run: number;
  /** Items waiting to start as runs of their own. */
  waiting: number;
}

export type Disposition = 'started' | 'steered' | 'queued' | 'rejected';
export type Row = Record<string, unknown>;

export interface SteeringRow {
  id: number;
  conversation_key: string;
  agent_id: string;
  runner_id: string;
  conversation_id: string;
  thread_id: string | null;
  workspace_id: string | null;
  event_id: string;
  kind: 'steer' | 'queue';
  state: string;
  run_id: string | null;
  position: number | null;
  next_run_id: string | null;
  dispatch: string | null;
  item: JsonObject;
  submission: JsonObject;
  created_at: number;
  redispatched_at: number | null;
}

export function steeringFromRow(r: Row): SteeringRow {
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    id: Number(r.id),
    conversation_key: String(r.conversation_key),
    agent_id: String(r.agent_id),
    runner_id: String(r.runner_id),
    conversation_id: String(r.conversation_id),
    thread_id: (r.thread_id as string | null) ?? null,
    workspace_id: (r.workspace_id as string | null) ?? null,
    event_id: String(r.event_id),
    kind: r.kind as 'steer' | 'queue',
    state: String(r.state),
    run_id: (r.run_id as string | null) ?? null,
    position: n(r.position),
    next_run_id: (r.next_run_id as string | null) ?? null,
    dispatch: (r.dispatch as string | null) ?? null,
    item: JSON.parse(String(r.item)) as JsonObject,
    submission: JSON.parse(String(r.submission)) as JsonObject,
    created_at: Number(r.created_at),
    redispatched_at: n(r.redispatched_at),
  };
}

/** The key of a conversation's lock (SQL.lockConversation), taken before its situation is read. */
export function conversationLockKey(c: ConversationRef): string {
  return `conversation:${c.key}`;
}

export function* conversationLock(c: ConversationRef): Unit<void> {
  yield* one(SQL.lockConversation, [conversationLockKey(c)]);
}

/** The parameters of STEERING_SQL.situation (its text is also a part of ADMISSION_READS). */
export function situationParams(c: ConversationRef): (string | null)[] {
  const ref = [c.agent_id, c.workspace_id, c.conversation_id, c.thread_id ?? ''];
  return [...ref, ...ref, c.key];
}

/** A situation row: STEERING_SQL.situation's, or ADMISSION_READS' first. */
export function situationFromRow(
  s: { run_id: string | null; queued: number | string; n: number | string } | undefined,
): ConversationSituation {
  return {
    running_run_id: s?.run_id ?? null,
    queued_on_run: Number(s?.queued ?? 0),
    waiting: Number(s?.n ?? 0),
  };
}

export function* situationOf(c: ConversationRef): Unit<ConversationSituation> {
  return situationFromRow(
    yield* one<{ run_id: string | null; queued: number | string; n: number | string }>(
      STEERING_SQL.situation,
      situationParams(c),
    ),
  );
}
