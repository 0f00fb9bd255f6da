import { Worker } from 'node:worker_threads';

export interface CheckpointOptions {
  /** A PASSIVE checkpoint runs once the WAL is larger than this… */
  walBytesTrigger: number;
  /** …or this long after the last one, whichever comes first. */
  intervalMs: number;
  /** Above this the worker truncates the WAL (waiting for readers, off the event loop). */
  walBytesCap: number;
  /**
   * No commit for this long: the worker truncates the WAL to zero bytes, once per idle spell —
   * after a burst of load the file returns to nothing instead of staying at its high-water mark.
   */
  idleTruncateMs: number;
}

export interface WalStatus {
  wal_bytes: number;
  last_checkpoint_at: number | null;
  checkpoints: number;
}

// Runs in a worker thread with its own connection: a checkpoint's fsync never blocks the host's
// only JS thread (with auto-checkpoint on, the commit crossing the threshold did it inline).
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const Database = require(workerData.sqlite);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 2000');
let last = Date.now();
let checkpoints = 0;
// data_version changes when another connection (the host's) committed: how idleness is seen.
let version = db.pragma('data_version', { simple: true });
let lastCommitSeen = Date.now();
let idleTruncated = false;
const size = () => { try { return fs.statSync(workerData.file + '-wal').size; } catch { return 0; } };
const tick = () => {
  const v = db.pragma('data_version', { simple: true });
  if (v !== version) {
    version = v;
    lastCommitSeen = Date.now();
    idleTruncated = false;
  }
  const wal = size();
  const idle = Date.now() - lastCommitSeen >= workerData.idle;
  const due = wal >= workerData.trigger || (wal > 0 && Date.now() - last >= workerData.interval);
  if (idle && wal > 0 && !idleTruncated) {
    try {
      const [r] = db.pragma('wal_checkpoint(TRUNCATE)');
      idleTruncated = !r || r.busy === 0; // busy: a reader held it; tried again next tick
      checkpoints++;
      last = Date.now();
    } catch (e) {
      parentPort.postMessage({ error: String(e && e.message || e) });
    }
  } else if (due) {
    try {
      db.pragma(wal >= workerData.cap ? 'wal_checkpoint(TRUNCATE)' : 'wal_checkpoint(PASSIVE)');
      checkpoints++;
      last = Date.now();
    } catch (e) {
      parentPort.postMessage({ error: String(e && e.message || e) });
    }
  }
  parentPort.postMessage({ wal_bytes: size(), last_checkpoint_at: checkpoints ? last : null, checkpoints });
};
const timer = setInterval(tick, workerData.poll);
parentPort.on('message', (m) => { if (m === 'stop') { clearInterval(timer); db.close(); parentPort.close(); } });
`;

/** WAL checkpoints of a SQLite file database, in a worker thread; the latest WAL size for readiness. */
export class Checkpointer {
  private readonly worker: Worker;
  status: WalStatus = { wal_bytes: 0, last_checkpoint_at: null, checkpoints: 0 };
  lastError: string | null = null;

  constructor(file: string, opts: CheckpointOptions) {
    this.worker = new Worker(WORKER, {
      eval: true,
      workerData: {
        file,
        sqlite: require.resolve('better-sqlite3'),
        trigger: opts.walBytesTrigger,
        interval: opts.intervalMs,
        cap: opts.walBytesCap,
        idle: opts.idleTruncateMs,
        poll: Math.min(250, opts.intervalMs),
      },
    });
    this.worker.unref();
    this.worker.on('message', (m: WalStatus | { error: string }) => {
      if ('error' in m) {
        this.lastError = m.error;
      } else {
        this.status = m;
      }
    });
    this.worker.on('error', (e) => {
      this.lastError = e.message;
    });
  }

  async stop(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.postMessage('stop');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 2000)))]);
    clearTimeout(timer);
    await this.worker.terminate();
  }
}
