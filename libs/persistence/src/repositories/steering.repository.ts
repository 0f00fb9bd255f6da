import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, LessThan, Repository, type FindOptionsWhere } from 'typeorm';
import { EventEntity, EventLogEntity, RunEntity, SteeringItemEntity } from '../entities';
import { HotStore } from '../hot/hot-store';
import {
  activeQuotaReached,
  startWaitingUnit,
  type ActiveQuota,
  type WaitingStart,
  type WaitingStartOutcome,
} from '../hot/admission-unit';
import type { NewResult, RunEnd } from '../hot/run-units';
import { STEERING_SQL } from '../hot/steering-sql';
import type { RunLease } from '../hot/run-fence';
import { failQueuedUnit, pullUnit, releaseOrphansUnit } from '../hot/steering-queue-units';
import {
  situationOf,
  steeringFromRow,
  type ConversationRef,
  type ConversationSituation,
  type SteeringRow,
} from '../hot/steering-rows';
import { one, rows } from '../hot/unit';

export interface SteeringFilter {
  run_id?: string;
  conversation_id?: string;
  agent_id?: string;
  workspace_id?: string;
  states?: string[];
}

export interface ConversationTimeline {
  events: EventEntity[];
  runs: RunEntity[];
  items: SteeringItemEntity[];
  log: EventLogEntity[];
}

/**
 * Conversations and steering queues: the hot path (pulls, waiting runs) through the one writer;
 * the admin views through TypeORM. Admission and the end of a run: RunsRepository.
 */
@Injectable()
export class SteeringRepository {
  constructor(
    private readonly hot: HotStore,
    @InjectRepository(SteeringItemEntity) private readonly items: Repository<SteeringItemEntity>,
    @InjectRepository(EventEntity) private readonly events: Repository<EventEntity>,
    @InjectRepository(RunEntity) private readonly runs: Repository<RunEntity>,
    @InjectRepository(EventLogEntity) private readonly log: Repository<EventLogEntity>,
  ) {}

  /** A steering hand-out; fenced by the run's lease when given (rejects with FencedError, nothing handed out). */
  pull(runId: string, limit: number, mode: string, lease: RunLease | null = null): Promise<SteeringRow[]> {
    return this.hot.write(() => pullUnit(runId, limit, mode, Date.now(), lease));
  }

  releaseOrphans(): Promise<number> {
    return this.hot.write(() => releaseOrphansUnit(Date.now()));
  }

  /** A waiting run starts, if its conversation is free and it is next (hot/admission-unit.ts). */
  startWaiting(w: WaitingStart): Promise<WaitingStartOutcome> {
    return this.hot.write(() => startWaitingUnit(w));
  }

  /**
   * Whether the workspace's running runs reach its `max_active_runs`, read now without its lock:
   * a hint that spares a waiting run blocked by the quota its preparation (docs/tenancy.md#quotas).
   * The start unit counts again under the lock and alone decides.
   */
  async activeQuotaReached(q: ActiveQuota): Promise<boolean> {
    return (await this.hot.read(activeQuotaReached(q))) !== null;
  }

  failQueued(itemId: number, terminal: NewResult, end: RunEnd): Promise<boolean> {
    return this.hot.write(() => failQueuedUnit(itemId, terminal, end));
  }

  situation(c: ConversationRef): Promise<ConversationSituation> {
    return this.hot.read(situationOf(c));
  }

  async nextWaiting(key: string): Promise<SteeringRow | null> {
    const r = await this.hot.read(one<Record<string, unknown>>(STEERING_SQL.nextWaiting, [key]));
    return r ? steeringFromRow(r) : null;
  }

  async itemOfNextRun(runId: string): Promise<SteeringRow | null> {
    const r = await this.hot.read(one<Record<string, unknown>>(STEERING_SQL.itemOfNextRun, [runId]));
    return r ? steeringFromRow(r) : null;
  }

  /** Conversations a waiting run of could start now (none of them busy: STEERING_SQL.waitingConversations). */
  async waitingConversations(): Promise<string[]> {
    const found = await this.hot.read(rows<{ conversation_key: string }>(STEERING_SQL.waitingConversations, []));
    return found.map((r) => r.conversation_key);
  }

  /** Admin: items, newest first; `beforeId` is the cursor. */
  page(filter: SteeringFilter, beforeId: number | null, limit: number): Promise<SteeringItemEntity[]> {
    const where: FindOptionsWhere<SteeringItemEntity> = {};
    if (filter.run_id !== undefined) {
      where.run_id = filter.run_id;
    }
    if (filter.conversation_id !== undefined) {
      where.conversation_id = filter.conversation_id;
    }
    if (filter.agent_id !== undefined) {
      where.agent_id = filter.agent_id;
    }
    if (filter.workspace_id !== undefined) {
      where.workspace_id = filter.workspace_id;
    }
    if (filter.states?.length) {
      where.state = In(filter.states);
    }
    if (beforeId !== null) {
      where.id = LessThan(beforeId);
    }
    return this.items.find({ where, order: { id: 'DESC' }, take: limit });
  }

  /** Admin: runs by id (for the queues' runs). */
  runsByIds(ids: string[]): Promise<RunEntity[]> {
    return ids.length ? this.runs.find({ where: { run_id: In(ids) } }) : Promise.resolve([]);
  }

  /** Admin: everything recorded about one conversation of an agent (optionally one thread), oldest first. */
  async timeline(
    conversationId: string,
    agentId?: string,
    limit = 500,
    workspaces: readonly string[] | null = null,
  ): Promise<ConversationTimeline> {
    const scoped = <T extends { conversation_id: string | null; agent_id: string }>() =>
      ({ conversation_id: conversationId, ...(agentId ? { agent_id: agentId } : {}) }) as FindOptionsWhere<T>;
    // docs/tenancy.md#isolation: rows with a workspace by it; events (which have none) by their agent's.
    const inWs = <T>(): FindOptionsWhere<T> =>
      (workspaces === null ? {} : { workspace_id: In([...workspaces]) }) as FindOptionsWhere<T>;
    const agents =
      workspaces === null
        ? null
        : (
            await this.events.manager.query<{ agent_id: string }[]>(
              `SELECT "agent_id" FROM "agents" WHERE "workspace_id" IN (${workspaces
                .map((_, i) => (this.events.manager.connection.options.type === 'postgres' ? `$${i + 1}` : '?'))
                .join(', ')})`,
              [...workspaces],
            )
          ).map((r) => r.agent_id);
    const eventsWhere =
      agents === null
        ? scoped<EventEntity>()
        : { ...scoped<EventEntity>(), agent_id: agentId ? (agents.includes(agentId) ? agentId : In([])) : In(agents) };
    const [events, runs, items, log] = await Promise.all([
      this.events.find({ where: eventsWhere, order: { received_at: 'ASC' }, take: limit }),
      this.runs.find({ where: { ...scoped<RunEntity>(), ...inWs<RunEntity>() }, order: { id: 'ASC' }, take: limit }),
      this.items.find({
        where: { ...scoped<SteeringItemEntity>(), ...inWs<SteeringItemEntity>() },
        order: { id: 'ASC' },
        take: limit,
      }),
      this.log.find({
        where: { ...scoped<EventLogEntity>(), ...inWs<EventLogEntity>() },
        order: { id: 'ASC' },
        take: limit,
      }),
    ]);
    return { events, runs, items, log };
  }
}
