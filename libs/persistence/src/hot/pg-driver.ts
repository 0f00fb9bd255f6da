import { Client, DatabaseError, Pool, type QueryConfig, type QueryResult } from 'pg';
import type { DbSessions } from '../db-sessions';
import type { HotStatement } from './hot-sql';
import { InsertBatch, PgInsertCombiner } from './insert-batch';
import { FENCED_SQLSTATE, FenceCache, FencedError, GROUP_KEYS, leaseOfFence, ridingFence } from './run-fence';
import { MISSED_SQLSTATE, SpeculationMissed, ridingEnd } from './speculation';
import { joined, type Changes, type Op, type SqlValue, type Unit } from './unit';
import type { WriterDriver } from './write-queue';
import { telemetry } from '@libs/telemetry';

function query(s: HotStatement, params: readonly SqlValue[]): QueryConfig {
  // An unnamed statement (a combined shape beyond the named ones: insert-batch.ts) is parsed each time.
  return s.name
    ? { name: s.name, text: s.pg, values: params as SqlValue[] }
    : { text: s.pg, values: params as SqlValue[] };
}

async function step(c: Client | Pool, op: Op): Promise<unknown> {
  return answer(op, await c.query(query(op.stmt, op.params)));
}

/** What a unit gets back for its op from the statement's result. */
function answer(op: Op, r: QueryResult): unknown {
  switch (op.kind) {
    case 'run':
      return { changes: r.rowCount ?? 0 };
    case 'get':
      return r.rows[0] as unknown;
    case 'all':
      return r.rows as unknown;
  }
}

async function drive<T>(c: Client | Pool, unit: Unit<T>): Promise<T> {
  let r = unit.next();
  while (!r.done) {
    r = unit.next(await step(c, r.value));
  }
  return r.value;
}

/** The answer a unit is handed for a statement guessed to change one row (a riding fence, ridingEnd). */
const MATCHED: Changes = { changes: 1 };

/** A guessed statement's failure: SpeculationMissed when its guess missed (MISSED_SQLSTATE), else as it is. */
function missed(e: unknown): never {
  throw e instanceof DatabaseError && e.code === MISSED_SQLSTATE ? new SpeculationMissed(e) : e;
}

/** A riding fence's failure: FencedError of its lease when it matched nothing (FENCED_SQLSTATE), else as it is. */
function fenced(op: Op): (e: unknown) => never {
  return (e) => {
    throw e instanceof DatabaseError && e.code === FENCED_SQLSTATE ? new FencedError(leaseOfFence(op)) : e;
  };
}

/**
 * What a unit returns given the answer to its final statement (Op.final, Op.finalIf): it must return
 * right after it — one that yields again is a bug of the unit, and fails its group (what the group
 * wrote is committed by then: docs/durability.md#the-writers-transactions-on-postgresql).
 */
function returned(unit: Unit<unknown>, op: Op, result: unknown): unknown {
  const r = unit.next(result);
  if (!r.done) {
    throw new Error(`a unit yielded ${r.value.stmt.name ?? 'a statement'} after its final statement ${op.stmt.name}`);
  }
  return r.value;
}

/** BEGIN failed: nothing written behind it ran (its cause is BEGIN's own error). */
class BeginFailed extends Error {
  constructor(override readonly cause: unknown) {
    super(`BEGIN failed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/**
 * The answer of the statement written right behind BEGIN. When BEGIN fails the statement did not
 * run either — the session is gone, or left in an aborted transaction where every statement fails
 * until ROLLBACK — so the failure is BEGIN's, and the group may be sent again on a new connection.
 */
async function afterBegin(begin: Promise<QueryResult>, statement: Promise<QueryResult>): Promise<QueryResult> {
  try {
    await begin;
  } catch (e) {
    statement.catch(() => undefined);
    throw new BeginFailed(e);
  }
  return statement;
}

/**
 * The group's last writes and its COMMIT, sent together: the first failing write is the group's
 * failure (COMMIT then ended the aborted transaction as a rollback); a COMMIT answered as anything
 * but COMMIT is one too.
 */
async function committed(writes: readonly Promise<unknown>[], commit: Promise<QueryResult>): Promise<void> {
  const settled = await Promise.allSettled([...writes, commit]);
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) {
    throw failed.reason;
  }
  const answer = (settled[settled.length - 1] as PromiseFulfilledResult<QueryResult>).value;
  if (answer.command !== 'COMMIT') {
    throw new Error(`COMMIT answered ${answer.command}: the transaction was rolled back`);
  }
}

/**
 * Hot statements on PostgreSQL: the writer owns one connection of its own (its transactions
 * cannot meet TypeORM's pool), reads use a small pool; every statement is a named prepared
 * statement, parsed once per connection. With `sessions`, every connection names this process
 * (`application_name`) and carries the idle-in-transaction timeout, so a process declared dead has
 * its sessions, and the locks of a transaction it was paused in, ended by its sweeper
 * (docs/scale-out.md#sessions-of-a-paused-process); the writer's connection, then broken, is made
 * again at the next group.
 */
export class PgHot implements WriterDriver {
  private connected?: Promise<void>;
  private writer!: Client;
  private readonly readers: Pool;
  /** Groups run one at a time (write-queue.ts), so one batch serves them all. */
  private readonly batch = new InsertBatch();
  private readonly fences = new FenceCache();
  private readonly combiner = new PgInsertCombiner();
  /** The writer's socket is corked until the next tick (coalesce). */
  private corked = false;

  constructor(
    private readonly url: string,
    private readonly sessions?: DbSessions,
  ) {
    this.readers = new Pool({ connectionString: url, max: 4, ...sessions?.options('reader') });
    // A broken pooled connection is dropped by the pool; do not crash the host on the event.
    this.readers.on('error', () => undefined);
    sessions?.watch(this.readers, 'reader');
  }

  /**
   * The writer's connection, made again after it broke (the failed group was already rejected:
   * a terminated session, docs/scale-out.md#sessions-of-a-paused-process), and renamed when this
   * process registered again under a new id since it was made.
   */
  private connect(): Promise<void> {
    if (this.connected) {
      this.sessions?.ensureNamed(this.writer, 'writer');
    } else {
      // Pipelined (node-postgres `pipeline`): a statement is written without waiting for the answer
      // of the one before, so BEGIN and COMMIT ride on the group's statements (group()).
      const client = new Client({ connectionString: this.url, pipeline: true, ...this.sessions?.options('writer') });
      const broken = (): void => {
        if (this.writer === client) {
          this.connected = undefined;
        }
      };
      client.on('error', broken);
      client.on('end', broken);
      this.writer = client;
      const connecting = client.connect().then(
        () => undefined,
        (e: unknown) => {
          this.connected = undefined;
          throw e;
        },
      );
      this.connected = connecting;
    }
    return this.connected;
  }

  ready(): boolean {
    return true;
  }

  read<T>(unit: Unit<T>): Promise<T> {
    return drive(this.readers, unit);
  }

  /**
   * One transaction for the group, the fences of its runs first as one statement
   * (FenceCache.prefetch); batchable inserts of all its units become one multi-row
   * INSERT per statement (insert-batch.ts), written before the next statement that may read them
   * and before COMMIT, the inserts of several tables as one statement (PgInsertCombiner) — or, in
   * the group's last unit, with its next statement that need not see them (carried).
   */
  async runGroup(units: readonly (() => Unit<unknown>)[]): Promise<unknown[]> {
    try {
      return await this.groupOnce(units, true);
    } catch (e) {
      if (!(e instanceof SpeculationMissed)) {
        throw e;
      }
    }
    // A guess of the group missed (speculation.ts): it was rolled back, nothing of it written. Once
    // more, every answer awaited: the outcome is the one an unguessed run gives.
    telemetry.writerGuessMissed();
    return this.groupOnce(units, false);
  }

  /** The group on the writer's connection; once more on a new connection when its BEGIN failed. */
  private async groupOnce(units: readonly (() => Unit<unknown>)[], guess: boolean): Promise<unknown[]> {
    await this.connect();
    const client = this.writer;
    try {
      return await this.group(units, guess);
    } catch (e) {
      if (!(e instanceof BeginFailed)) {
        throw e;
      }
      // Nothing of the group ran: the connection is dropped (e.g. terminated while idle:
      // docs/scale-out.md#sessions-of-a-paused-process), made again and the group sent once more,
      // so a broken idle connection costs no write.
      if (this.writer === client) {
        this.connected = undefined;
        client.end().catch(() => undefined);
      }
    }
    await this.connect();
    try {
      return await this.group(units, guess);
    } catch (e) {
      throw e instanceof BeginFailed ? e.cause : e;
    }
  }

  /**
   * One transaction for the group on the pipelined writer: `BEGIN` is written with the group's
   * first statement and `COMMIT` with its last held inserts — or with its last unit's final
   * statement (Op.final) — without waiting for their answers in between
   * (docs/durability.md#the-writers-transactions-on-postgresql); a group that sends nothing sends
   * neither. With `guess`, a run's end is written without waiting for its answer (ridingEnd) and
   * an Op.finalIf statement is written as the last one, COMMIT with it (speculation.ts). The final
   * statement of a unit before the last is not awaited either (its unit returns after COMMIT), nor
   * are held inserts written ahead of a statement that must see them: the group waits only for the
   * answers its units decide on.
   */
  private async group(units: readonly (() => Unit<unknown>)[], guess: boolean): Promise<unknown[]> {
    const writer = this.writer;
    const batch = this.batch;
    const fences = this.fences;
    batch.clear();
    fences.reset();
    let begun = false;
    /** COMMIT was written (with the group's final statement). */
    let ended = false;
    /** A statement written on the writer's connection, in the socket write of its tick (coalesced). */
    const write = (q: QueryConfig | string): Promise<QueryResult> => {
      this.coalesce(writer);
      return writer.query(q);
    };
    const send = (q: QueryConfig): Promise<QueryResult> => {
      if (begun) {
        return write(q);
      }
      begun = true;
      return afterBegin(write('BEGIN'), write(q));
    };
    /**
     * Statements written without waiting for their answers, which decide nothing but their failure:
     * the group's key-lock statement (GROUP_KEYS below) and riding fences (ridingFence).
     */
    let riders: Promise<unknown>[] = [];
    /** Sent without waiting: its failure is the group's, and awaited before any later answer. */
    const ride = (r: Promise<unknown>): void => {
      r.catch(() => undefined);
      riders.push(r);
    };
    /** A statement's answer, after the riders' written before it: their failure is the group's, not this statement's. */
    const answered = async (r: Promise<QueryResult>): Promise<QueryResult> => {
      if (riders.length > 0) {
        r.catch(() => undefined);
        const before = riders;
        riders = [];
        for (const rider of before) {
          await rider;
        }
      }
      return r;
    };
    const run = async (op: Op): Promise<unknown> => answer(op, await answered(send(query(op.stmt, op.params))));
    /** The held inserts as statements (insert-batch.ts), the batch emptied. */
    const held = (): QueryConfig[] =>
      batch.empty ? [] : this.combiner.combine(batch.take()).map((h) => query(h.stmt, h.params));
    /**
     * The held inserts written before a statement that must see them: right ahead of it, without
     * waiting (their answers decide nothing; a failing one fails the group, reported by the next
     * answer awaited: `answered`).
     */
    const flush = (): void => {
      for (const q of held()) {
        ride(send(q));
      }
    };
    /**
     * Final statements (Op.final, or guessed: Op.finalIf) of units before the last, written without
     * waiting: their units end with the answer once the group is committed (their failure is the
     * group's, as a rider's).
     */
    const deferred: { i: number; unit: Unit<unknown>; op: Op; answer: Promise<QueryResult> }[] = [];
    try {
      // Every unit stepped to its first statement (a unit computes nothing but statements:
      // unit.ts), so the runs whose units open with a fence are fenced as one statement.
      const started = units.map((u) => {
        const unit = u();
        return { unit, first: unit.next() };
      });
      const prefetch = fences.prefetch(started.flatMap((s) => (s.first.done ? [] : [s.first.value])));
      const prefetchEnd = guess && prefetch ? ridingEnd(prefetch.stmt) : undefined;
      if (prefetch && prefetchEnd) {
        // The run's end hoisted ahead of its results (FenceCache.hoist), guessed to match its row.
        ride(send(query(prefetchEnd, prefetch.params)).catch(missed));
        fences.prefetched(MATCHED);
      } else if (prefetch?.stmt === GROUP_KEYS) {
        // Advisory keys only: the answer decides nothing (the keys are taken, or the statement
        // fails and the group with it), so the units' statements are written right behind it —
        // the server runs them after it, each with a snapshot taken once the locks are held.
        ride(send(query(prefetch.stmt, prefetch.params)));
        fences.prefetched({});
      } else if (prefetch) {
        fences.prefetched(await run(prefetch));
      }
      const out: unknown[] = new Array<unknown>(started.length);
      for (const [i, { unit, first }] of started.entries()) {
        // In the last unit no later unit adds rows to the held ones: they may ride on its next
        // statement that need not see them, instead of a flush of their own before COMMIT.
        const last = i === started.length - 1;
        let r = first;
        while (!r.done) {
          const op = r.value;
          const held = batch.hold(op) ?? fences.answer(op);
          if (held) {
            r = unit.next(held);
            continue;
          }
          if (batch.mustFlush(op.stmt)) {
            flush();
          }
          // A fence that matches nothing fails the statement, and the group with it (FencedError,
          // as the unit would have thrown); a run's end guessed to match its row fails it when it
          // does not (SpeculationMissed). Their answers decide nothing but that failure, so the
          // statements behind them are written without waiting for them.
          const fence = ridingFence(op.stmt);
          const end = !fence && guess ? ridingEnd(op.stmt) : undefined;
          const rider = fence
            ? send(query(fence, [...op.params, leaseOfFence(op).run_id])).catch(fenced(op))
            : end
              ? send(query(end, op.params)).catch(missed)
              : null;
          if (rider) {
            ride(rider);
            fences.ran(op, MATCHED);
            r = unit.next(MATCHED);
            continue;
          }
          if (!last && (op.final || (guess && op.finalIf))) {
            // The unit's last statement, not the group's: written without waiting for its answer.
            const sent = op.final ? send(query(op.stmt, op.params)) : send(query(op.finalIf!, op.params)).catch(missed);
            ride(sent);
            deferred.push({ i, unit, op, answer: sent });
            break;
          }
          // The last unit's Op.finalIf statement in the form that fails unless it is the last.
          const finalIf = last && guess && !op.final && op.finalIf ? { ...op, stmt: op.finalIf } : null;
          const carried = last ? this.carried(finalIf ?? op) : null;
          if (last && (op.final || finalIf) && batch.empty) {
            // The group's last statement (Op.final, or guessed: Op.finalIf): COMMIT is written with it.
            const sent = carried ?? finalIf ?? op;
            const final = answered(send(query(sent.stmt, sent.params)));
            ended = true;
            await committed([finalIf ? final.catch(missed) : final], write('COMMIT'));
            r = { done: true, value: returned(unit, op, answer(op, await final)) };
            break;
          }
          // Any other statement (in the last unit carrying the held rows when it can): awaited.
          const result = await run(carried ?? op);
          fences.ran(op, result);
          r = unit.next(result);
        }
        if (r.done) {
          out[i] = r.value;
        }
      }
      // The last held inserts and COMMIT in one write: no answer of theirs decides anything before
      // COMMIT; an insert that fails leaves the transaction aborted, and COMMIT then rolls it back.
      if (!ended) {
        const writes = [...riders, ...held().map(send)];
        riders = [];
        if (begun) {
          ended = true;
          await committed(writes, write('COMMIT'));
        }
      }
      for (const d of deferred) {
        out[d.i] = returned(d.unit, d.op, answer(d.op, await d.answer));
      }
      return out;
    } catch (e) {
      if (begun && !ended && !(e instanceof BeginFailed)) {
        await write('ROLLBACK').catch(() => undefined);
      }
      throw e;
    }
  }

  /**
   * Corks the writer's socket until the end of this tick (process.nextTick, before the event loop
   * waits for I/O): the statements a group writes without waiting in between — `BEGIN` with its
   * first statement, held inserts with `COMMIT`, a riding fence with what follows — leave in one
   * socket write instead of one per statement (node-postgres writes each query on its own). On
   * this VM a write to a local socket costs tens of µs of the host's CPU, most of it waking the
   * server's process (docs/benchmarks.md, round 18).
   */
  private coalesce(client: Client): void {
    if (this.corked) {
      return;
    }
    const stream = client.connection.stream;
    this.corked = true;
    stream.cork();
    process.nextTick(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  /**
   * The op with the held inserts riding on it as one statement (PgInsertCombiner.carrier), the
   * held rows then written; null when it cannot carry them (they stay held).
   */
  private carried(op: Op): Op | null {
    if (this.batch.empty || !this.combiner.canCarry(op.stmt)) {
      return null;
    }
    const held = this.batch.pending();
    const stmt = this.combiner.carrier(held, op.stmt);
    if (!stmt) {
      return null;
    }
    this.batch.clear();
    return { ...op, stmt, params: joined([...held.map((h) => h.params), op.params]) };
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.connected ? this.writer.end() : Promise.resolve(), this.readers.end()]);
  }
}
