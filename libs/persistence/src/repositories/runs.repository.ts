import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, In, LessThan, Repository, type FindOptionsWhere } from 'typeorm';
import type { RunStatus } from '@libs/protocol';
import { EventEntity, EventLogEntity, RunEntity, RunResultEntity } from '../entities';
import { FastInsert } from '../fast-insert';
import { Transactions } from '../transactions';

const RESULT_COLUMNS = ['run_id', 'sequence', 'type', 'data', 'usage', 'source', 'timestamp', 'created_at'] as const;
import { ContextRepository, type NewTranscriptRow } from './context.repository';

export interface RunListFilter {
  conversation_id?: string;
  status?: RunStatus[];
  agent_id?: string;
}

export type RunFinal = Pick<RunEntity, 'status' | 'status_reason' | 'error_code' | 'retryable' | 'finished_at'> &
  Partial<Pick<RunEntity, 'usage'>>;

@Injectable()
export class RunsRepository {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(RunEntity) private readonly runs: Repository<RunEntity>,
    @InjectRepository(EventEntity) private readonly events: Repository<EventEntity>,
    @InjectRepository(RunResultEntity) private readonly results: Repository<RunResultEntity>,
    private readonly context: ContextRepository,
    private readonly tx: Transactions,
  ) {
    this.resultInsert = new FastInsert(db, 'run_results', RESULT_COLUMNS);
  }

  private readonly resultInsert: FastInsert;

  /**
   * Records an event (new, or a retry of one whose run failed at admission), its run, its event
   * log row and the user's transcript row, atomically: all or nothing.
   */
  async admit(
    event: EventEntity,
    run: Omit<RunEntity, 'id'>,
    log: Omit<EventLogEntity, 'id'>,
    userRow: NewTranscriptRow | null,
  ): Promise<void> {
    await this.tx.run(async (m) => {
      await m.save(EventEntity, event);
      await m.insert(RunEntity, run);
      await this.context.appendEvent(log, m);
      if (userRow) {
        await this.context.appendTranscript(userRow, m);
      }
    });
  }

  async getEvent(eventId: string): Promise<EventEntity | null> {
    return this.events.findOne({ where: { event_id: eventId } });
  }

  async getEventByIdempotencyKey(key: string): Promise<EventEntity | null> {
    return this.events.findOne({ where: { idempotency_key: key } });
  }

  async get(runId: string): Promise<RunEntity | null> {
    return this.runs.findOne({ where: { run_id: runId } });
  }

  /** Newest first; `beforeId` is the cursor (internal id of the last row of the previous page). */
  async page(filter: RunListFilter, beforeId: number | null, limit: number): Promise<RunEntity[]> {
    const where: FindOptionsWhere<RunEntity> = {};
    if (filter.conversation_id !== undefined) {
      where.conversation_id = filter.conversation_id;
    }
    if (filter.agent_id !== undefined) {
      where.agent_id = filter.agent_id;
    }
    if (filter.status && filter.status.length > 0) {
      where.status = In(filter.status);
    }
    if (beforeId !== null) {
      where.id = LessThan(beforeId);
    }
    return this.runs.find({ where, order: { id: 'DESC' }, take: limit });
  }

  /**
   * Records a run's terminal result and its final status atomically, if the run is still active;
   * false (and nothing written) when it already ended.
   */
  async finish(result: Omit<RunResultEntity, 'id'>, final: RunFinal): Promise<boolean> {
    return this.tx.run(async (m) => {
      const r = await m.update(RunEntity, { run_id: result.run_id, status: In(['queued', 'running']) }, final);
      if ((r.affected ?? 0) === 0) {
        return false;
      }
      await m.insert(RunResultEntity, result);
      return true;
    });
  }

  async markCancelRequested(runId: string, at: number): Promise<void> {
    await this.runs.update({ run_id: runId }, { cancel_requested_at: at });
  }

  async listActive(): Promise<RunEntity[]> {
    return this.runs.find({ where: { status: In(['queued', 'running']) } });
  }

  async insertResult(r: Omit<RunResultEntity, 'id'>): Promise<void> {
    await this.resultInsert.run({
      ...r,
      data: JSON.stringify(r.data),
      usage: r.usage === null ? null : JSON.stringify(r.usage),
    });
  }

  /** Results with sequence > `after`, in order. */
  async resultsAfter(runId: string, after: number, limit: number): Promise<RunResultEntity[]> {
    return this.results
      .createQueryBuilder('r')
      .where('r.run_id = :runId AND r.sequence > :after', { runId, after })
      .orderBy('r.sequence', 'ASC')
      .take(limit)
      .getMany();
  }

  async lastSequence(runId: string): Promise<number> {
    const row = await this.results
      .createQueryBuilder('r')
      .select('MAX(r.sequence)', 'max')
      .where('r.run_id = :runId', { runId })
      .getRawOne<{ max: number | string | null }>();
    return row?.max === null || row?.max === undefined ? 0 : Number(row.max);
  }
}
