import { Injectable } from '@nestjs/common';
import {
  EventLogService,
  StateService,
  TranscriptService,
  conversationOf,
  eventRecord,
  type PageRequest,
} from '@libs/conversations';
import { DomainError } from '@libs/protocol';
import type { RunGrant } from '@libs/runs';

/**
 * Pull APIs over the run's conversation: history, events, state, prompt, run. The conversation is
 * the run's agent + workspace + conversation id + thread (conversationOf): another agent's or
 * another workspace's rows under the same conversation id are never read. A run without a
 * conversation gets empty pages.
 */
@Injectable()
export class ContextApiService {
  constructor(
    private readonly transcript: TranscriptService,
    private readonly events: EventLogService,
    private readonly state: StateService,
  ) {}

  async historyPage(run: RunGrant, req: PageRequest) {
    return this.transcript.page(conversationOf(run.snapshot.scope), req);
  }

  async historySearch(run: RunGrant, query: string, topK: number | undefined) {
    return this.transcript.search(conversationOf(run.snapshot.scope), query, topK);
  }

  /** An event of this run, or of the run's conversation and thread (the id is required by event.get's schema). */
  async eventGet(run: RunGrant, eventId: string) {
    const e = await this.events.get(eventId);
    if (!e) {
      throw new DomainError('not_found', `event ${eventId} not found`, { event_id: eventId });
    }
    const conversation = conversationOf(run.snapshot.scope);
    const sameRun = e.run_id === run.run_id;
    const sameConversation =
      conversation !== null &&
      e.agent_id === conversation.agent_id &&
      e.workspace_id === conversation.workspace_id &&
      e.conversation_id === conversation.conversation_id &&
      e.thread_id === conversation.thread_id;
    if (!sameRun && !sameConversation) {
      throw new DomainError('unauthorized', `event ${eventId} is not accessible by this run`, { event_id: eventId });
    }
    return eventRecord(e);
  }

  async eventPage(run: RunGrant, types: string[], beforeCursor: string | undefined, limit: number | undefined) {
    return this.events.page(conversationOf(run.snapshot.scope), types, beforeCursor, limit);
  }

  async stateGet(run: RunGrant, scope: string, key: string) {
    return { value: await this.state.get(run.snapshot.state.scope_keys, scope, key) };
  }

  async stateSet(run: RunGrant, scope: string, key: string, value: unknown) {
    await this.state.set(run.snapshot.state.scope_keys, scope, key, value, run.lease ?? null);
    return { success: true };
  }

  async stateDelete(run: RunGrant, scope: string, key: string) {
    return { success: await this.state.delete(run.snapshot.state.scope_keys, scope, key, run.lease ?? null) };
  }

  async stateList(run: RunGrant, scope: string, prefix: string | undefined, limit: number | undefined) {
    return this.state.list(run.snapshot.state.scope_keys, scope, prefix, limit);
  }

  prompt(run: RunGrant) {
    return { prompt: run.snapshot.prompt };
  }

  runGet(run: RunGrant) {
    return {
      run_id: run.run_id,
      status: 'running',
      cancel_requested: run.cancel_requested,
      deadline_at: run.snapshot.deadline_at_ms === null ? undefined : run.snapshot.deadline_at_ms / 1000,
      started_at: run.started_at / 1000,
    };
  }
}
