import { Injectable } from '@nestjs/common';
import { EventLogService, StateService, TranscriptService, eventRecord, type PageRequest } from '@libs/conversations';
import { DomainError } from '@libs/protocol';
import type { ActiveRun } from '@libs/runs';

/** Pull APIs over the run's conversation: history, events, state, prompt, run. */
@Injectable()
export class ContextApiService {
  constructor(
    private readonly transcript: TranscriptService,
    private readonly events: EventLogService,
    private readonly state: StateService,
  ) {}

  async historyPage(run: ActiveRun, req: PageRequest) {
    const scope = run.snapshot.scope;
    return this.transcript.page(scope.conversation_id!, scope.thread_id, req);
  }

  async historySearch(run: ActiveRun, query: string, topK: number | undefined) {
    const scope = run.snapshot.scope;
    return this.transcript.search(scope.conversation_id!, scope.thread_id, query, topK);
  }

  /** An event of this run, or of the run's conversation and thread. */
  async eventGet(run: ActiveRun, eventId: string) {
    if (!eventId) {
      throw new DomainError('invalid_argument', 'event_id: is required', { field: 'event_id' });
    }
    const e = await this.events.get(eventId);
    if (!e) {
      throw new DomainError('not_found', `event ${eventId} not found`, { event_id: eventId });
    }
    const scope = run.snapshot.scope;
    const sameRun = e.run_id === run.run_id;
    const sameConversation =
      scope.conversation_id !== null && e.conversation_id === scope.conversation_id && e.thread_id === scope.thread_id;
    if (!sameRun && !sameConversation) {
      throw new DomainError('unauthorized', `event ${eventId} is not accessible by this run`, { event_id: eventId });
    }
    return eventRecord(e);
  }

  async eventPage(run: ActiveRun, types: string[], beforeCursor: string | undefined, limit: number | undefined) {
    const scope = run.snapshot.scope;
    return this.events.page(scope.conversation_id!, scope.thread_id, types, beforeCursor, limit);
  }

  async stateGet(run: ActiveRun, scope: string, key: string) {
    return { value: await this.state.get(run.snapshot.state.scope_keys, scope, key) };
  }

  async stateSet(run: ActiveRun, scope: string, key: string, value: unknown) {
    await this.state.set(run.snapshot.state.scope_keys, scope, key, value);
    return { success: true };
  }

  async stateDelete(run: ActiveRun, scope: string, key: string) {
    return { success: await this.state.delete(run.snapshot.state.scope_keys, scope, key) };
  }

  async stateList(run: ActiveRun, scope: string, prefix: string | undefined, limit: number | undefined) {
    return this.state.list(run.snapshot.state.scope_keys, scope, prefix, limit);
  }

  prompt(run: ActiveRun) {
    return { prompt: run.snapshot.prompt };
  }

  runGet(run: ActiveRun) {
    return {
      run_id: run.run_id,
      status: 'running',
      cancel_requested: run.cancel_requested,
      deadline_at: run.snapshot.deadline_at_ms === null ? undefined : run.snapshot.deadline_at_ms / 1000,
      started_at: run.started_at / 1000,
    };
  }
}
