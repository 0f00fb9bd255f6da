import { Worker } from 'node:worker_threads';

export interface CheckpointOptions {
  /** A PASSIVE checkpoint runs once the WAL is larger than this… */
  walBytesTrigger: number;
  /** …or this long after the last one, whichever comes first. */
  intervalMs: number;
  /** Above this the worker truncates the WAL (once a PASSIVE checkpoint copied all of it). */
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
// The WAL is always copied into the database by a PASSIVE checkpoint, which takes no writer lock.
// A TRUNCATE checkpoint holds the writer lock for all its work — with frames left to copy, for the
// whole copy and fsync (~0.3 s for 100 MiB on a quiet disk, seconds under load), while the host's
// BEGIN IMMEDIATE waits synchronously and then fails SQLITE_BUSY (the 500 "database is locked" of
// docs/durability.md#sqlite). So TRUNCATE runs only after a PASSIVE one copied every frame, with a
// short busy timeout: it holds the lock only to cut the file, and gives up (tried again next
// tick) rather than wait for the host's readers.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const Database = require(workerData.sqlite);
const db = new Database(workerData.file);
db.pragma('busy_timeout = ' + workerData.truncateWaitMs);
let last = Date.now();
let checkpoints = 0;
// data_version changes when another connection (the host's) committed: how idleness is seen.
let version = db.pragma('data_version', { simple: true });
let lastCommitSeen = Date.now();
let idleTruncated = false;
const size = () => { try { return fs.statSync(workerData.file + '-wal').size; } catch { return 0; } };
// PASSIVE, then (if asked, every frame is copied and nothing was committed meanwhile) TRUNCATE;
// true once the WAL was truncated. A commit during the PASSIVE one left frames it did not copy:
// TRUNCATE would copy and fsync them holding the writer lock, so it waits for a quieter tick.
const checkpoint = (truncate) => {
  const before = db.pragma('data_version', { simple: true });
  const [p] = db.pragma('wal_checkpoint(PASSIVE)');
  checkpoints++;
  last = Date.now();
  if (!truncate || !p || p.busy !== 0 || p.log !== p.checkpointed) {
    return false;
  }
  if (db.pragma('data_version', { simple: true }) !== before) {
    return false;
  }
  const [t] = db.pragma('wal_checkpoint(TRUNCATE)');
  return !t || t.busy === 0; // busy: the host held the writer lock or a read; tried again next tick
};
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
  try {
    if (idle && wal > 0 && !idleTruncated) {
      idleTruncated = checkpoint(true);
    } else if (due) {
      checkpoint(wal >= workerData.cap);
    }
  } catch (e) {
    parentPort.postMessage({ error: String(e && e.message || e) });
  }
  parentPort.postMessage({ wal_bytes: size(), last_checkpoint_at: checkpoints ? last : null, checkpoints });
};
const timer = setInterval(tick, workerData.poll);
parentPort.on('message', (m) => { if (m === 'stop') { clearInterval(timer); db.close(); parentPort.close(); } });
`;

/**
 * How long the worker's TRUNCATE waits for the writer lock and for the host's readers (holding the
 * writer lock meanwhile): well under the host's SQLITE_BUSY_TIMEOUT_MS (data-source.ts).
 */
export const TRUNCATE_WAIT_MS = 20;

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
        truncateWaitMs: TRUNCATE_WAIT_MS,
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
