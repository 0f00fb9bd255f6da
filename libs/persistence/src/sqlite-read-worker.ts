import { Worker } from 'node:worker_threads';

// Runs in a worker thread with a read-only connection of its own: a statement whose cost grows
// with the data (a knowledge search ranking every chunk its words match) runs whole there, so the
// host's only JS thread never waits for it (docs/models-tools-knowledge.md#searches-off-the-event-loop).
// Statements run one at a time, in arrival order; each reads the last committed snapshot (WAL)
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

/**
 * Read-only statements of a SQLite file database, run in a worker thread. Started at the first
 * statement; a worker that failed or exited fails the statements it held and is started again at
 * the next one. Only SELECTs (better-sqlite3's `reader` and `readonly`) are run.
 */
export class SqliteReadWorker {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closed = false;

  constructor(private readonly file: string) {}

  all<T>(sql: string, params: readonly unknown[]): Promise<T[]> {
    if (this.closed) {
      return Promise.reject(new Error('the SQLite read worker is closed'));
    }
    const worker = this.started();
    const id = ++this.nextId;
    return new Promise<T[]>((resolve, reject) => {
      this.pending.set(id, { worker, resolve: resolve as (rows: unknown[]) => void, reject });
      worker.postMessage({ id, sql, params });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    this.worker = undefined;
    if (worker === undefined) {
      return;
    }
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage('stop');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 2000)))]);
    clearTimeout(timer);
    await worker.terminate();
    this.failAll(new Error('the SQLite read worker is closed'));
  }

  private started(): Worker {
    if (this.worker !== undefined) {
      return this.worker;
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
      if (this.worker === worker) {
        this.worker = undefined;
      }
      this.failAll(e, worker);
    };
    worker.on('error', gone);
    worker.on('exit', (code) => gone(new Error(`the SQLite read worker exited (${code})`)));
    this.worker = worker;
    return worker;
  }

  /** Fails the statements `worker` held (all, without one): a worker started after it keeps its own. */
  private failAll(e: Error, worker?: Worker): void {
    for (const [id, p] of this.pending) {
      if (worker === undefined || p.worker === worker) {
        this.pending.delete(id);
        p.reject(e);
      }
    }
  }
}
