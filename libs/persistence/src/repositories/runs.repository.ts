import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, IsNull, LessThan, Not, Raw, Repository, type FindOptionsWhere } from 'typeorm';
import { TERMINAL_RESULT_TYPES, type RunStatus } from '@libs/protocol';
import { EventEntity, RunEntity, type JsonObject } from '../entities';
import { joinSnapshot, SNAPSHOT_SQL } from '../hot/snapshot-rows';
import { HotStore } from '../hot/hot-store';
import { SQL } from '../hot/hot-sql';
import { admitUnit, type AdmissionRows, type AdmitOutcome } from '../hot/admission-unit';
import {
  cancelRequestedUnit,
  eventFromRow,
  resultUnit,
  type NewResult,
  type RunEnd,
  type StateWrite,
} from '../hot/run-units';
import { endRunUnit } from '../hot/steering-queue-units';
import type { RunLease } from '../hot/run-fence';
import { orphansUnit, takeOverUnit, type OrphanRef, type TakeOver, type TakeOverOutcome } from '../hot/run-takeover';
import type { NewOutboxRow } from '../hot/outbox-units';
import { one, rows } from '../hot/unit';
import type { NewTranscriptRow } from './context.repository';
import { ParsedRows } from './parsed-rows';
import { CommittedResults, type SizedRow } from './committed-results';
import { answerPage, ChainTips } from './cumulative-deltas';

/*
 * The replay caches below are bounded by the memory they keep, counted in characters of one-byte
 * text: the stored texts plus, per entry, the memory of its objects. Measured (docs/benchmarks.md,
 * "Host memory across a soak"): a parsed result row with its key and texts ≈ 470 bytes beyond
 * its texts, and the SSE frame apps/host builds once per row object (a Buffer and its bytes)
 * ≈ 350; a chain tip's object and map entry ≈ 150. Counting texts alone, a bound of small rows
 * held about ten times its size.
 */
/** Memory of a kept result row beyond its stored texts: the parsed row and its SSE frame. */
const RESULT_ROW_CHARS = 800;
/** Memory of a kept chain tip beyond its text. */
const CHAIN_TIP_ENTRY_CHARS = 160;
/** Result rows kept parsed for readers replaying the same results (parsed-rows.ts). */
const REPLAY_MEMO_CHARS = 24 * 1024 * 1024;
/** Result rows kept as runs' committed prefixes (committed-results.ts); the rows are mostly those kept parsed. */
const REPLAY_PREFIX_CHARS = 16 * 1024 * 1024;
/** Message text kept as runs' chain tips, for the next page read (cumulative-deltas.ts). */
const CHAIN_TIP_CHARS = 16 * 1024 * 1024;
/** A run's prefix not read for this long is dropped (committed-results.ts). */
const REPLAY_PREFIX_IDLE_MS = 60_000;

export interface StoredResult {
  run_id: string;
  sequence: number;
  type: string;
  data: Record<string, unknown>;
  usage: Record<string, unknown> | null;
  source: 'runner' | 'host';
  timestamp: number | null;
}

/** A run's status as a host API call at any process re-reads it. */
export interface RunLiveness {
  status: RunStatus;
  /** When it started (epoch ms; its admission when it has not started). */
  started_at: number;
  cancel_requested: boolean;
  /**
   * Its lease as the row names it (null: not owned): a host API write served for it at another
   * process is fenced by it (docs/scale-out.md#fenced-host-api-writes).
   */
  lease: RunLease | null;
}

export interface RunListFilter {
  conversation_id?: string;
  status?: RunStatus[];
  agent_id?: string;
  /** Only runs of these workspaces (docs/tenancy.md#isolation); undefined: every workspace. */
  workspaces?: readonly string[];
}

/**
 * Runs, events and results. The run path (admission, results, the end of a run, the stream
 * lookups) goes through the hot store — the one writer and prepared statements; listings and the
 * full run record through TypeORM.
 */
@Injectable()
export class RunsRepository {
  constructor(
    @InjectRepository(RunEntity) private readonly runs: Repository<RunEntity>,
    private readonly hot: HotStore,
  ) {}

  /** Results parsed for one replay, shared with the next reader that reads the same rows. */
  private readonly parsedResults = new ParsedRows<StoredResult>(REPLAY_MEMO_CHARS, RESULT_ROW_CHARS);
  /** Where each run's last page read left its cumulative message (cumulative-deltas.ts). */
  private readonly chainTips = new ChainTips(CHAIN_TIP_CHARS, CHAIN_TIP_ENTRY_CHARS);
  /** Runs' committed results from the first on, shared by the readers replaying them. */
  private readonly committedResults = new CommittedResults<StoredResult>({
    maxChars: REPLAY_PREFIX_CHARS,
    rowChars: RESULT_ROW_CHARS,
    idleMs: REPLAY_PREFIX_IDLE_MS,
    isLast: (r) => TERMINAL_RESULT_TYPES.includes(r.type),
  });

  /**
   * Admits an event (new, or a retry of one that was not accepted) in one commit: the decision
   * under its conversation's lock, then the event, its log row, and by disposition its run, its
   * steering item or its waiting run, and the user's transcript row (hot/admission-unit.ts). A
   * duplicate writes nothing and returns the event recorded first. On PostgreSQL the situation's
   * read and the claim of an event prepared to start are one statement (admitUnit's `claimIfFree`).
   */
  admit(a: AdmissionRows): Promise<AdmitOutcome> {
    const claimIfFree = this.hot.dialect === 'postgres';
    return this.hot.write(() => admitUnit(a, claimIfFree));
  }

  async getEvent(eventId: string): Promise<EventEntity | null> {
    const r = await this.hot.read(one<Record<string, unknown>>(SQL.eventById, [eventId]));
    return r ? eventFromRow(r) : null;
  }

  async getEventByIdempotencyKey(key: string): Promise<EventEntity | null> {
    const r = await this.hot.read(one<Record<string, unknown>>(SQL.eventByKey, [key]));
    return r ? eventFromRow(r) : null;
  }

  /** The status of a run, without reading its context and snapshot; null when unknown. */
  async status(runId: string): Promise<RunStatus | null> {
    const r = await this.hot.read(one<{ status: RunStatus }>(SQL.runStatus, [runId]));
    return r?.status ?? null;
  }

  /**
   * Whether a run still runs, for a host API call served by a process that does not own it: one
   * primary-key read per call (docs/scale-out.md#host-api-anywhere). null when unknown.
   */
  async liveness(runId: string): Promise<RunLiveness | null> {
    const r = await this.hot.read(
      one<{
        status: RunStatus;
        created_at: string | number;
        started_at: string | number | null;
        cancel_requested_at: string | number | null;
        attempt: string | number;
        owner_process_id: string | null;
      }>(SQL.runLiveness, [runId]),
    );
    return r
      ? {
          status: r.status,
          started_at: Number(r.started_at ?? r.created_at),
          cancel_requested: r.cancel_requested_at !== null,
          lease: r.owner_process_id
            ? { run_id: runId, attempt: Number(r.attempt), owner_process_id: r.owner_process_id }
            : null,
        }
      : null;
  }

  async get(runId: string): Promise<RunEntity | null> {
    return this.runs.findOne({ where: { run_id: runId } });
  }

  /**
   * A run's frozen authorization snapshot, whole (its shared part is stored once by its hash:
   * hot/snapshot-rows.ts), and the stored SHA-256 of its canonical JSON; null for an unknown run.
   */
  async authorization(
    runId: string,
  ): Promise<{ authorization: JsonObject | null; authorization_hash: string | null } | null> {
    const r = await this.hot.read(
      one<{ authorization_hash: string | null; authorization_run: string | null; content: string | null }>(
        SNAPSHOT_SQL.ofRun,
        [runId],
      ),
    );
    return r
      ? { authorization: joinSnapshot(r.content, r.authorization_run), authorization_hash: r.authorization_hash }
      : null;
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
      // With a conversation, its index (conversation_id, id) drives the read: the status is tested
      // as an expression, or SQLite's planner (no statistics) walks every run of that status
      // instead (docs/benchmarks.md, "The runs status indexes off the per-run write path").
      where.status =
        filter.conversation_id !== undefined
          ? Raw((column) => `COALESCE(${column}, '') IN (:...statuses)`, { statuses: filter.status })
          : In(filter.status);
    }
    if (filter.workspaces !== undefined) {
      where.workspace_id = In([...filter.workspaces]);
    }
    if (beforeId !== null) {
      where.id = LessThan(beforeId);
    }
    return this.runs.find({ where, order: { id: 'DESC' }, take: limit });
  }

  /**
   * The end of a run in one commit — final status, terminal result, its state write, its last
   * delivery ops, the assistant transcript row, and the release of its undrained steering items —
   * if the run is still active (`ended` false, nothing written, when it already ended). With the
   * run's conversation key, `waiting` says whether a run waits in the conversation (endRunUnit).
   */
  end(
    terminal: NewResult,
    end: RunEnd,
    state: StateWrite | null = null,
    assistant: NewTranscriptRow | null = null,
    outbox: readonly NewOutboxRow[] = [],
    lease: RunLease | null = null,
    conversationKey: string | null = null,
  ): Promise<{ ended: boolean; released: number; waiting: boolean }> {
    return this.hot.write(() => endRunUnit(terminal, end, state, assistant, outbox, lease, conversationKey));
  }

  /** `end`, answering only whether the run ended now (false: it had already ended). */
  async endIfActive(
    terminal: NewResult,
    end: RunEnd,
    state: StateWrite | null = null,
    assistant: NewTranscriptRow | null = null,
    outbox: readonly NewOutboxRow[] = [],
  ): Promise<boolean> {
    return (await this.end(terminal, end, state, assistant, outbox)).ended;
  }

  markCancelRequested(runId: string, at: number): Promise<void> {
    return this.hot.write(() => cancelRequestedUnit(runId, at));
  }

  /**
   * Of these runs, the running ones with a cancel request (written by any process): the poll
   * behind the `cancel` signal (docs/scale-out.md#everything-from-anywhere). Read in chunks.
   */
  async cancelRequestedAmong(runIds: readonly string[]): Promise<string[]> {
    const found: string[] = [];
    for (let i = 0; i < runIds.length; i += 500) {
      const chunk = runIds.slice(i, i + 500);
      const rows = await this.runs.find({
        select: { run_id: true },
        where: { run_id: In(chunk), status: 'running', cancel_requested_at: Not(IsNull()) },
      });
      found.push(...rows.map((r) => r.run_id));
    }
    return found;
  }

  /** Orphaned runs (owner dead), oldest first; with `withUnowned`, running runs with no owner too. */
  orphans(limit: number, withUnowned: boolean): Promise<OrphanRef[]> {
    return this.hot.read(orphansUnit(limit, withUnowned));
  }

  /** The takeover of one orphaned run, in one commit under its row lock (hot/run-takeover.ts). */
  takeOver(t: TakeOver): Promise<TakeOverOutcome> {
    return this.hot.write(() => takeOverUnit(t));
  }

  async listActive(): Promise<RunEntity[]> {
    return this.runs.find({ where: { status: In(['queued', 'running']) } });
  }

  /**
   * One non-terminal result (and the state write and delivery ops it implies), committed in
   * submission order; fenced by the run's lease when given (rejects with FencedError, nothing written).
   */
  insertResult(
    r: NewResult,
    state: StateWrite | null = null,
    outbox: readonly NewOutboxRow[] = [],
    lease: RunLease | null = null,
  ): Promise<void> {
    return this.hot.write(() => resultUnit(r, state, outbox, lease));
  }

  /**
   * Results with sequence > `after`, in order; shared, frozen objects (do not change them). Readers
   * of the same run share one read of its committed rows (committed-results.ts); what they have
   * not read yet comes from the database.
   */
  resultsAfter(runId: string, after: number, limit: number): Promise<StoredResult[]> {
    return this.committedResults.page(runId, after, limit, (from, n) => this.readResults(runId, from, n));
  }

  private async readResults(runId: string, after: number, limit: number): Promise<SizedRow<StoredResult>[]> {
    const found = await this.readStored(runId, after, limit);
    // Cumulative deltas stored without their all_content are answered with it, rebuilt from the
    // rows before them back to their full row (docs/durability.md#cumulative-deltas).
    const rebuilt = await answerPage(
      found.map((f) => f.row),
      async (from, count) => (await this.readStored(runId, from - 1, count)).map((b) => b.row),
      this.chainTips.get(runId),
    );
    this.chainTips.set(runId, rebuilt.tip);
    return found.map((f, i) => {
      const data = rebuilt.data[i];
      if (data === null) {
        return f;
      }
      const all = (data.chunk as { all_content?: unknown }).all_content;
      return {
        row: Object.freeze({ ...f.row, data }),
        size: f.size + (typeof all === 'string' ? all.length : 0),
      };
    });
  }

  /** Stored rows with sequence > `after`, as stored (a cumulative delta with its marker). */
  private async readStored(runId: string, after: number, limit: number): Promise<SizedRow<StoredResult>[]> {
    const found = await this.hot.read(rows<Record<string, unknown>>(SQL.resultsAfter, [runId, after, limit]));
    // The same committed row (run, sequence, stored texts) read by several readers is one shared,
    // frozen object: parsed once, and its SSE frame built once (parsed-rows.ts).
    return found.map((r) => {
      const data = r.data as string;
      const usage = typeof r.usage === 'string' ? r.usage : null;
      const row = this.parsedResults.get(`${String(r.run_id)}\u0000${Number(r.sequence)}`, [data, usage], () => ({
        run_id: String(r.run_id),
        sequence: Number(r.sequence),
        type: String(r.type),
        data: JSON.parse(data) as Record<string, unknown>,
        usage: usage === null ? null : (JSON.parse(usage) as Record<string, unknown>),
        source: r.source as 'runner' | 'host',
        timestamp: r.timestamp === null ? null : Number(r.timestamp),
      }));
      return { row, size: data.length + (usage?.length ?? 0) };
    });
  }

  async lastSequence(runId: string): Promise<number> {
    const r = await this.hot.read(one<{ max: number | string | null }>(SQL.lastSequence, [runId]));
    return r?.max === null || r?.max === undefined ? 0 : Number(r.max);
  }
}
