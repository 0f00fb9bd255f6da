import * as os from 'node:os';
import { Worker } from 'node:worker_threads';

// Runs in each worker thread of the pool, with a read-only connection of its own: a statement whose cost grows
// with the data (a knowledge search ranking every chunk its words match) runs whole there, so the
// host's only JS thread never waits for it (docs/models-tools-knowledge.md#searches-off-the-event-loop).
// Statements run one at a time per worker, in arrival order; each reads the last committed snapshot (WAL)
// and ends with the statement, like the host's own read-only connection (docs/durability.md,
// "Reads on their own connection"). A busy database (WAL recovery only, for a reader) is waited
// for here, off the event loop.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.sqlite);
const db = new Database(workerData.file, { readonly: true, fileMustExist: true, timeout: workerData.busyMs });
const statements = new Map();
parentPort.on('message', (m) => {
  if (m === 'stop') { db.close(); parentPort.close(); return; }
  try {
    let stmt = statements.get(m.sql);
    if (stmt === undefined) {
      stmt = db.prepare(m.sql);
      if (!stmt.reader || !stmt.readonly) { throw new Error('not a read: ' + m.sql.slice(0, 80)); }
      if (statements.size >= 100) { statements.delete(statements.keys().next().value); }
      statements.set(m.sql, stmt);
    }
    parentPort.postMessage({ id: m.id, rows: stmt.all(...m.params) });
  } catch (e) {
    parentPort.postMessage({ id: m.id, error: String((e && e.message) || e), code: e && e.code });
  }
});
`;

/** How long a statement in the worker waits for a busy database (off the event loop). */
const WORKER_BUSY_MS = 10_000;

type Pending = { worker: Worker; resolve: (rows: unknown[]) => void; reject: (e: Error) => void };

/** Workers of a pool when the configuration names no size: two, or one on a single core. */
export function defaultReadWorkers(cores = os.availableParallelism()): number {
  return Math.max(1, Math.min(2, cores));
}

/**
 * Read-only statements of a SQLite file database, run in a small pool of worker threads
 * (`size`, SQLITE_SEARCH_WORKERS: docs/configuration.md), each with its own read-only connection:
 * concurrent searches run side by side instead of queueing behind one
 * (docs/models-tools-knowledge.md#searches-off-the-event-loop). A statement goes to the worker
 * holding the fewest statements (the first such). A worker is started at its first statement; one
 * that failed or exited fails the statements it held — only those — and is started again at its
 * next one. Only SELECTs (better-sqlite3's `reader` and `readonly`) are run.
 */
export class SqliteReadWorker {
  private readonly workers: Array<Worker | undefined>;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly file: string,
    size = 1,
  ) {
    if (!Number.isInteger(size) || size < 1) {
      throw new Error(`SQLite read workers: size must be a positive integer (got ${size})`);
    }
    this.workers = new Array<Worker | undefined>(size).fill(undefined);
  }

  /** Workers in the pool (started or not). */
  get size(): number {
    return this.workers.length;
  }

  /** Workers started and not exited. */
  get running(): number {
    return this.workers.filter((w) => w !== undefined).length;
  }

  all<T>(sql: string, params: readonly unknown[]): Promise<T[]> {
    if (this.closed) {
      return Promise.reject(new Error('the SQLite read worker is closed'));
    }
    const worker = this.started(this.leastBusy());
    const id = ++this.nextId;
    return new Promise<T[]>((resolve, reject) => {
      this.pending.set(id, { worker, resolve: resolve as (rows: unknown[]) => void, reject });
      try {
        worker.postMessage({ id, sql, params });
      } catch (e) {
        // A parameter that cannot be sent (a function, say): nothing was posted, nothing is held.
        this.pending.delete(id);
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const workers = this.workers.filter((w): w is Worker => w !== undefined);
    this.workers.fill(undefined);
    await Promise.all(workers.map((w) => stop(w)));
    this.failAll(new Error('the SQLite read worker is closed'));
  }

  /** The slot whose worker holds the fewest statements (a slot not started holds none). */
  private leastBusy(): number {
    const held = this.workers.map(() => 0);
    for (const p of this.pending.values()) {
      const i = this.workers.indexOf(p.worker);
      if (i >= 0) {
        held[i]++;
      }
    }
    return held.indexOf(Math.min(...held));
  }

  private started(slot: number): Worker {
    const running = this.workers[slot];
    if (running !== undefined) {
      return running;
    }
    const worker = new Worker(WORKER, {
      eval: true,
      workerData: { file: this.file, sqlite: require.resolve('better-sqlite3'), busyMs: WORKER_BUSY_MS },
    });
    worker.unref();
    worker.on('message', (m: { id: number; rows?: unknown[]; error?: string; code?: string }) => {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.error !== undefined) {
        p?.reject(Object.assign(new Error(m.error), { code: m.code }));
      } else {
        p?.resolve(m.rows ?? []);
      }
    });
    const gone = (e: Error) => {
      const i = this.workers.indexOf(worker);
      if (i >= 0) {
        this.workers[i] = undefined;
      }
      this.failAll(e, worker);
    };
    worker.on('error', gone);
    worker.on('exit', (code) => gone(new Error(`the SQLite read worker exited (${code})`)));
    this.workers[slot] = worker;
    return worker;
  }

  /** Fails the statements `worker` held (all, without one): the other workers keep their own. */
  private failAll(e: Error, worker?: Worker): void {
    for (const [id, p] of this.pending) {
      if (worker === undefined || p.worker === worker) {
        this.pending.delete(id);
        p.reject(e);
      }
    }
  }
}

/** Asks a worker to close its connection and exit; terminates it after 2 s. */
async function stop(worker: Worker): Promise<void> {
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  worker.postMessage('stop');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 2000)))]);
  clearTimeout(timer);
  await worker.terminate();
}
