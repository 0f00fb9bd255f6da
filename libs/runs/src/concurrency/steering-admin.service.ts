import { Injectable } from '@nestjs/common';
import { InteractionsRepository } from '@libs/interactions';
import { SteeringRepository, type SteeringFilter, type SteeringItemEntity } from '@libs/persistence';
import { parseRowCursor, readPage } from '@libs/protocol';
import { ActiveRuns } from '../active-runs';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export interface SteeringItemView {
  id: number;
  event_id: string;
  kind: 'steer' | 'queue';
  /** steer: queued | injected | redispatched; queue: waiting. */
  state: string;
  /** waiting | started | failed: for an item due as a run of its own. */
  dispatch: string | null;
  agent_id: string;
  workspace_id: string | null;
  conversation_id: string;
  thread_id: string | null;
  run_id: string | null;
  position: number | null;
  next_run_id: string | null;
  pull_mode: string | null;
  text: string;
  created_at: string;
  injected_at: string | null;
  dropped_at: string | null;
  redispatched_at: string | null;
  started_at: string | null;
}

export interface SteeringView {
  /** Runs active in this host with a conversation, and their steering queues (items not pulled yet). */
  active_runs: {
    run_id: string;
    agent_id: string;
    workspace_id: string | null;
    conversation_id: string | null;
    thread_id: string | null;
    steering_pull: boolean;
    started_at: string;
    queue: SteeringItemView[];
  }[];
  /** Every item matching the filter, newest first. */
  items: SteeringItemView[];
  next_cursor: string | null;
}

export interface TimelineEntry {
  at: string;
  type: string;
  event_id: string | null;
  run_id: string | null;
  detail: Record<string, unknown>;
}

export interface TimelineView {
  conversation_id: string;
  entries: TimelineEntry[];
}

function itemView(i: SteeringItemEntity): SteeringItemView {
  const input = (i.item as { input?: { text?: unknown } }).input;
  return {
    id: i.id,
    event_id: i.event_id,
    kind: i.kind,
    state: i.state,
    dispatch: i.dispatch,
    agent_id: i.agent_id,
    workspace_id: i.workspace_id,
    conversation_id: i.conversation_id,
    thread_id: i.thread_id,
    run_id: i.run_id,
    position: i.position,
    next_run_id: i.next_run_id,
    pull_mode: i.pull_mode,
    text: typeof input?.text === 'string' ? input.text.slice(0, 200) : '',
    created_at: iso(i.created_at)!,
    injected_at: iso(i.injected_at),
    dropped_at: iso(i.dropped_at),
    redispatched_at: iso(i.redispatched_at),
    started_at: iso(i.started_at),
  };
}

/**
 * The admin views of conversations and steering
 * (docs/conversations-and-steering.md#inspecting-a-conversation): what happened to every follow-up,
 * and why.
 */
@Injectable()
export class SteeringAdminService {
  constructor(
    private readonly steering: SteeringRepository,
    private readonly active: ActiveRuns,
    private readonly interactions: InteractionsRepository,
  ) {}

  async list(filter: SteeringFilter, cursor: string | null, limit: number): Promise<SteeringView> {
    const before = parseRowCursor(cursor);
    const { rows: page, next_cursor } = await readPage(
      limit,
      (n) => this.steering.page(filter, before, n),
      (r) => r.id,
    );
    const runs = this.active
      .all()
      .filter((r) => r.snapshot.scope.conversation_id !== null && !r.ended)
      .filter((r) => filter.run_id === undefined || r.run_id === filter.run_id)
      .filter((r) => filter.agent_id === undefined || r.agent_id === filter.agent_id)
      .filter((r) => filter.workspace_id === undefined || r.snapshot.scope.workspace_id === filter.workspace_id)
      .filter(
        (r) => filter.conversation_id === undefined || r.snapshot.scope.conversation_id === filter.conversation_id,
      )
      .slice(0, 100);
    const active_runs = await Promise.all(
      runs.map(async (r) => ({
        run_id: r.run_id,
        agent_id: r.agent_id,
        workspace_id: r.snapshot.scope.workspace_id,
        conversation_id: r.snapshot.scope.conversation_id,
        thread_id: r.snapshot.scope.thread_id,
        steering_pull: r.snapshot.available_apis.steering_pull,
        started_at: new Date(r.started_at).toISOString(),
        queue: (await this.steering.page({ run_id: r.run_id, states: ['queued'] }, null, 100)).reverse().map(itemView),
      })),
    );
    return {
      active_runs,
      items: page.map(itemView),
      next_cursor,
    };
  }

  /** A conversation's events (with their dispositions), runs and steering transitions, oldest first. */
  /** `workspaces`: only rows of those workspaces (docs/tenancy.md#isolation); null: all. */
  async timeline(
    conversationId: string,
    agentId?: string,
    workspaces: readonly string[] | null = null,
  ): Promise<TimelineView> {
    const t = await this.steering.timeline(conversationId, agentId, 500, workspaces);
    // Ties within one millisecond: an event before what it caused; a run's end before the release of
    // its queue; a released item before the run it became; a run created before it started.
    const entries: (TimelineEntry & { ms: number; order: number })[] = [];
    const add = (ms: number, order: number, e: TimelineEntry) => entries.push({ ...e, ms, order });
    for (const e of t.events) {
      add(e.received_at, 0, {
        at: iso(e.received_at)!,
        type: 'event',
        event_id: e.event_id,
        run_id: e.run_id,
        detail: { event_type: e.event_type, disposition: e.disposition, agent_id: e.agent_id, thread_id: e.thread_id },
      });
    }
    for (const r of t.runs) {
      const base = { event_id: r.event_id, run_id: r.run_id };
      add(r.created_at, 3, {
        ...base,
        at: iso(r.created_at)!,
        type: 'run.created',
        detail: { agent_id: r.agent_id, workspace_id: r.workspace_id },
      });
      if (r.started_at !== null) {
        add(r.started_at, 4, { ...base, at: iso(r.started_at)!, type: 'run.started', detail: {} });
      }
      if (r.finished_at !== null) {
        add(r.finished_at, 1, {
          ...base,
          at: iso(r.finished_at)!,
          type: 'run.ended',
          detail: { status: r.status, error_code: r.error_code },
        });
      }
    }
    for (const l of t.log) {
      if (l.event_type.startsWith('steering.')) {
        add(l.created_at, 2, {
          at: iso(l.created_at)!,
          type: l.event_type,
          event_id: l.event_id,
          run_id: l.run_id,
          detail: (l.metadata as { steering?: Record<string, unknown> }).steering ?? {},
        });
      }
    }
    // docs/interactions.md#admin: each request, and its outcome when it has one.
    for (const i of await this.interactions.ofConversation(conversationId, agentId, 500)) {
      const base = { event_id: null, run_id: i.run_id };
      const ref = { id: i.id, interaction_id: i.interaction_id };
      const title = typeof i.request.title === 'string' ? i.request.title : '';
      add(i.created_at, 2, {
        ...base,
        at: iso(i.created_at)!,
        type: 'interaction.requested',
        detail: { ...ref, kind: i.kind, title, expires_at: iso(i.expires_at) },
      });
      if (i.status === 'submitted' && i.submitted_at !== null) {
        const s = (i.submission ?? {}) as { action_id?: unknown };
        add(i.submitted_at, 0, {
          at: iso(i.submitted_at)!,
          type: 'interaction.submitted',
          event_id: i.submission_event_id,
          run_id: i.run_id,
          detail: { ...ref, action_id: s.action_id ?? null },
        });
      } else if (i.status !== 'pending') {
        add(i.updated_at, 2, {
          ...base,
          at: iso(i.updated_at)!,
          type: `interaction.${i.status}`,
          detail: { ...ref, status_reason: i.status_reason },
        });
      }
    }
    entries.sort((a, b) => a.ms - b.ms || a.order - b.order);
    return { conversation_id: conversationId, entries: entries.map(({ ms: _ms, order: _order, ...e }) => e) };
  }
}
