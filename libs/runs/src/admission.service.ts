import { createHash, randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { RunsRepository, type EventEntity, type JsonObject, type NewRun } from '@libs/persistence';
import { DomainError, parseRunnerId } from '@libs/protocol';
import { RunnerDispatch } from '@libs/runner-gateway';
import { AdmissionCatalog } from './admission-catalog';
import { eventLogRow, userTranscriptRow } from './admission-records';
import { rejectedError, unavailableError, unavailableRun } from './admission-failures';
import { ConversationAdmission } from './conversations/conversation-admission';
import { redactSubmission, type EventSubmission } from './event-submission';
import { RunStarter } from './run-start';
import { telemetry } from '@libs/telemetry';
import type { Admission } from './admission';

export type { Admission } from './admission';

/** Dispositions of events that were not accepted: the same event (same body) may be sent again. */
const RETRYABLE = ['failed', 'rejected'];

/**
 * Event intake (`POST /v1/events`, docs/api.md#routes): dedupe, resolve the agent, freeze grants, record,
 * dispatch. An event of a conversation goes through the conversation's concurrency policy
 * (ConversationAdmission); one without a conversation always starts a run.
 */
@Injectable()
export class AdmissionService {
  private readonly logger = new Logger('Admission');

  constructor(
    private readonly catalog: AdmissionCatalog,
    private readonly runs: RunsRepository,
    private readonly runners: RunnerDispatch,
    private readonly starter: RunStarter,
    private readonly conversations: ConversationAdmission,
  ) {}

  submit(sub: EventSubmission, idempotencyKey: string | null): Promise<Admission> {
    return telemetry.tracing.inSpan('admission', { 'runnerhost.agent_id': sub.agent_id }, () =>
      this.admit(sub, idempotencyKey),
    );
  }

  private async admit(sub: EventSubmission, idempotencyKey: string | null): Promise<Admission> {
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
    const readmit = previous !== null && RETRYABLE.includes(previous.disposition) && previous.body_hash === bodyHash;
    if (previous && !readmit) {
      return this.duplicate(previous, bodyHash);
    }
    const eventId = previous?.event_id ?? sub.event.event_id ?? randomUUID();
    const agent = await this.catalog.agent(sub.agent_id).catch((e: unknown) => {
      throw e instanceof DomainError ? new DomainError(e.code, e.message, { ...e.details, field: 'agent_id' }) : e;
    });
    parseRunnerId(agent.runner_id);
    const live = this.runners.target(agent.runner_id);
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
    const prepared = await this.starter.prepare(runId, eventId, sub, agent, live, now);
    const logRow = eventLogRow(eventId, sub, prepared.scope, runId, now);
    const user = userTranscriptRow(eventId, sub, prepared.scope, now);
    if (sub.conversation) {
      const a = await this.conversations.admit({ sub, agent, event, prepared, live, log: logRow, user, readmit });
      return a.admitted ? a.admission : this.duplicate(a.existing, bodyHash);
    }
    if (!live) {
      return this.failUnavailable(event, prepared.run, logRow, readmit, bodyHash);
    }
    const stored = prepared.run.context as { context: Record<string, unknown> };
    const outcome = await telemetry.tracing.inSpan('writer commit', {}, () =>
      this.runs.admit({
        event,
        run: prepared.run,
        log: logRow,
        user,
        terminal: null,
        readmit,
        // The event's position in the event log (the EventPage cursor), known once its row is written.
        contextAt: (event_seq) => ({ ...stored, context: { ...stored.context, event_seq } }),
      }),
    );
    if (!outcome.admitted) {
      // A concurrent duplicate won the insert: answer like it.
      return this.duplicate(outcome.existing, bodyHash);
    }
    telemetry.eventAdmitted('started', agent.runner_id);
    telemetry.tracing.runStarted(runId, {
      'runnerhost.runner_id': agent.runner_id,
      'runnerhost.agent_id': agent.agent_id,
    });
    prepared.context.context = { ...prepared.context.context!, event_seq: outcome.event_seq };
    this.starter.dispatch(prepared, agent, live);
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
      throw unavailableError(previous.event_id, previous.run_id ?? '', 'the runner is not connected');
    }
    if (previous.disposition === 'rejected') {
      throw rejectedError(previous.event_id, previous.run_id);
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
    const failed = unavailableRun(run);
    const outcome = await this.runs.admit({
      event,
      run: failed.run,
      log: { ...logRow, metadata: { ...logRow.metadata, disposition: 'failed', error_code: 'runner.unavailable' } },
      user: null,
      terminal: failed.terminal,
      readmit,
    });
    if (!outcome.admitted) {
      return this.duplicate(outcome.existing, bodyHash);
    }
    telemetry.eventAdmitted('failed', run.runner_id);
    telemetry.runEnded(run.runner_id, 'failed', run.created_at);
    this.logger.warn({ run_id: run.run_id, msg: `run failed at admission: ${failed.reason}` });
    throw unavailableError(event.event_id, run.run_id, failed.reason);
  }

  private async previous(eventId: string | null, key: string | null): Promise<EventEntity | null> {
    return (
      (key ? await this.runs.getEventByIdempotencyKey(key) : null) ??
      (eventId ? await this.runs.getEvent(eventId) : null)
    );
  }
}
