import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, IsNull, LessThan, LessThanOrEqual, MoreThan, Not, Repository } from 'typeorm';
import {
  HotStore,
  InteractionEntity,
  claimInteractionUnit,
  closeInteractionUnit,
  insertInteractionUnit,
  type InteractionFence,
  type InteractionStatus,
  type JsonObject,
} from '@libs/persistence';

/**
 * The interactions table: every transition out of `pending` is one conditional UPDATE. What the
 * run's owner writes for the run (a new request, an elicitation's close and answer, superseding)
 * goes through the one writer behind the run's fence (docs/scale-out.md#fenced-writes): a
 * process that lost the run's lease writes nothing (FencedError, the unit rolled back).
 */
@Injectable()
export class InteractionsRepository {
  constructor(
    @InjectRepository(InteractionEntity) private readonly repo: Repository<InteractionEntity>,
    private readonly hot: HotStore,
  ) {}

  /** A new pending interaction of a run, fenced by `fence` (null: an unleased run, unfenced). */
  insert(row: InteractionEntity, fence: InteractionFence | null): Promise<void> {
    return this.hot.write(() => insertInteractionUnit(row, fence));
  }

  /** `pending` → `submitted` for the run's owner (an elicitation's answer), fenced; true when claimed here. */
  claimFenced(
    id: string,
    submission: JsonObject,
    eventId: string,
    now: number,
    fence: InteractionFence,
  ): Promise<boolean> {
    return this.hot.write(() => claimInteractionUnit(id, submission, eventId, now, fence));
  }

  /** `pending` → `expired` | `superseded` by the run's owner, fenced; true when closed here. */
  closeFenced(
    id: string,
    status: Exclude<InteractionStatus, 'pending' | 'submitted'>,
    reason: string,
    now: number,
    fence: InteractionFence,
  ): Promise<boolean> {
    return this.hot.write(() => closeInteractionUnit(id, status, reason, now, fence));
  }

  get(id: string): Promise<InteractionEntity | null> {
    return this.repo.findOne({ where: { id } });
  }

  byTokenHash(hash: string): Promise<InteractionEntity | null> {
    return this.repo.findOne({ where: { callback_token_hash: hash } });
  }

  /**
   * `pending` → `submitted`, only while pending and not past its expiry: of several concurrent
   * submissions exactly one gets `true`.
   */
  async claim(id: string, submission: JsonObject, eventId: string, now: number): Promise<boolean> {
    const r = await this.repo.update(
      { id, status: 'pending', expires_at: MoreThan(now) },
      { status: 'submitted', submission, submitted_at: now, submission_event_id: eventId, updated_at: now },
    );
    return (r.affected ?? 0) > 0;
  }

  /** `pending` → `expired` | `superseded`, once. */
  async close(id: string, status: Exclude<InteractionStatus, 'pending' | 'submitted'>, reason: string, now: number) {
    const where =
      status === 'expired'
        ? { id, status: 'pending' as const, expires_at: LessThanOrEqual(now) }
        : { id, status: 'pending' as const };
    const r = await this.repo.update(where, { status, status_reason: reason, updated_at: now });
    return (r.affected ?? 0) > 0;
  }

  /** Pending rows past their expiry, oldest first, at most `limit` (the sweep's batch). */
  dueForExpiry(now: number, limit: number): Promise<InteractionEntity[]> {
    return this.repo.find({
      where: { status: 'pending', expires_at: LessThanOrEqual(now) },
      order: { expires_at: 'ASC' },
      take: limit,
    });
  }

  /** Pending requests of the same conversation made by other runs (a new request supersedes them). */
  pendingOfConversation(
    agentId: string,
    conversationId: string,
    threadId: string | null,
    exceptRunId: string,
  ): Promise<InteractionEntity[]> {
    return this.repo.find({
      where: {
        agent_id: agentId,
        conversation_id: conversationId,
        thread_id: threadId === null ? IsNull() : threadId,
        status: 'pending',
        run_id: Not(exceptRunId),
      },
      take: 100,
    });
  }

  /** A page by status, oldest first, after a created_at/id cursor. */
  page(statuses: InteractionStatus[], before: number | null, limit: number): Promise<InteractionEntity[]> {
    return this.repo.find({
      where: { status: In(statuses), ...(before !== null ? { created_at: LessThan(before) } : {}) },
      order: { created_at: 'DESC', id: 'ASC' },
      take: limit,
    });
  }

  /** A conversation's interactions (of one agent, when given), oldest first, at most `limit`. */
  ofConversation(conversationId: string, agentId: string | undefined, limit: number): Promise<InteractionEntity[]> {
    return this.repo.find({
      where: { conversation_id: conversationId, ...(agentId ? { agent_id: agentId } : {}) },
      order: { created_at: 'ASC' },
      take: limit,
    });
  }

  ofRun(runId: string): Promise<InteractionEntity[]> {
    return this.repo.find({ where: { run_id: runId }, order: { created_at: 'ASC' } });
  }
}
