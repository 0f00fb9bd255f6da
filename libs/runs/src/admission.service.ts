import { createHash, randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { AgentsService } from '@libs/agents';
import { RunsRepository, type AgentEntity, type EventEntity, type JsonObject, type RunEntity } from '@libs/persistence';
import { DomainError, parseRunnerId } from '@libs/protocol';
import { RunnerConnections } from '@libs/runner-gateway';
import { redactSubmission, type EventSubmission } from './event-submission';
import { buildRunContext, contextJson } from './run-context.builder';
import { RunLifecycleService } from './run-lifecycle.service';

export interface Admission {
  event_id: string;
  disposition: string;
  run_id: string | null;
  /** True when this answers a duplicate of an event already accepted. */
  replayed: boolean;
}

/** Event intake (SPEC §12 `POST /v1/events`): dedupe, resolve the agent, record, dispatch. */
@Injectable()
export class AdmissionService {
  private readonly logger = new Logger('Admission');

  constructor(
    private readonly agents: AgentsService,
    private readonly runs: RunsRepository,
    private readonly connections: RunnerConnections,
    private readonly lifecycle: RunLifecycleService,
  ) {}

  async submit(sub: EventSubmission, idempotencyKey: string | null): Promise<Admission> {
    const bodyHash = createHash('sha256').update(JSON.stringify(sub)).digest('hex');
    const previous = await this.previous(sub.event.event_id ?? null, idempotencyKey);
    const eventId = previous?.event_id ?? sub.event.event_id ?? randomUUID();
    // An event whose runner was unavailable was not accepted: the same event may be retried.
    if (previous && !(previous.disposition === 'failed' && previous.body_hash === bodyHash)) {
      if (previous.body_hash !== bodyHash) {
        throw new DomainError('conflict', 'this event_id / Idempotency-Key was already used with a different body', {
          event_id: previous.event_id,
        });
      }
      return {
        event_id: previous.event_id,
        disposition: previous.disposition,
        run_id: previous.run_id,
        replayed: true,
      };
    }
    const agent = await this.agents.getEntity(sub.agent_id).catch((e: unknown) => {
      throw e instanceof DomainError ? new DomainError(e.code, e.message, { ...e.details, field: 'agent_id' }) : e;
    });
    const ref = parseRunnerId(agent.runner_id);
    const live = ref === 'builtin' ? undefined : this.connections.runner(agent.runner_id);
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
    const { context, deadlineAtMs } = buildRunContext(runId, eventId, sub, agent, now);
    const run = this.runRow(runId, event, agent, contextJson(context), now, deadlineAtMs);
    if (!live) {
      const reason = `runner ${agent.runner_id} is not connected`;
      await this.runs.admit(event, {
        ...run,
        status: 'failed',
        status_reason: reason,
        error_code: 'runner.unavailable',
        retryable: true,
        finished_at: now,
      });
      this.logger.warn({ run_id: runId, msg: `run failed at admission: ${reason}` });
      throw new DomainError(
        'unavailable',
        `${reason}; the event was recorded and its run failed (runner.unavailable)`,
        {
          event_id: eventId,
          run_id: runId,
          error_code: 'runner.unavailable',
        },
      );
    }
    await this.runs.admit(event, run);
    // Between the check above and now the runner may have gone: dispatch only on a live session.
    const session = this.connections.runner(agent.runner_id)?.session;
    const active = this.lifecycle.start(runId, agent.runner_id, session ?? live.session, deadlineAtMs);
    if (session !== live.session) {
      this.lifecycle.conclude(active, {
        status: 'failed',
        code: 'runner.disconnected',
        error: 'runner disconnected before the run was dispatched',
        retryable: true,
      });
    } else {
      session.send({ run: { runner_id: agent.runner_id, runner_name: live.runner.name, context } });
      this.logger.log({ run_id: runId, msg: `run dispatched to ${agent.runner_id}` });
    }
    return { event_id: eventId, disposition: 'started', run_id: runId, replayed: false };
  }

  private async previous(eventId: string | null, key: string | null): Promise<EventEntity | null> {
    return (
      (key ? await this.runs.getEventByIdempotencyKey(key) : null) ??
      (eventId ? await this.runs.getEvent(eventId) : null)
    );
  }

  private runRow(
    runId: string,
    event: EventEntity,
    agent: AgentEntity,
    context: Record<string, unknown>,
    now: number,
    deadline: number | null,
  ): Omit<RunEntity, 'id'> {
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
      created_at: now,
      started_at: now,
      finished_at: null,
      deadline_at: deadline,
      cancel_requested_at: null,
    };
  }
}
