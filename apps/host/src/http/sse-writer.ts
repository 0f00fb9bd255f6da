import type { Writable } from 'node:stream';
import { ReleasingMap, ReleasingSet, type StreamEnd, type StreamItem, type StreamSource } from '@libs/streams';

/**
 * Replay pages: rows per read, sized from the rows just read so that a page holds about
 * PAGE_TARGET_BYTES of frames (results range from bytes to MAX_RESULT_BYTES each).
 */
const FIRST_PAGE = 16;
const MAX_PAGE = 512;
const PAGE_TARGET_BYTES = 256 * 1024;

export interface SseLimits {
  /** Unsent live frames (our queue + the socket's buffer) above which the reader is cut. */
  maxBacklogBytes: number;
  keepAliveMs: number;
  /**
   * Live frames leave a reader at most every this many ms (SSE_FLUSH_INTERVAL_MS): frames that
   * arrive sooner after its last write wait and leave together in the next one, so a fast stream
   * costs one socket write per interval per reader instead of one per tick. The first frame after
   * a pause and the stream's last frame leave at once. 0 or absent: every tick.
   */
  flushIntervalMs?: number;
}

/**
 * A stream item is one object shared by every reader (live: the published item; replayed: the
 * repository's shared row): its frame is built and UTF-8 encoded once for all of them, and a
 * reader's write only copies the bytes (docs/api.md#the-result-stream-sse).
 */
const frames = new WeakMap<object, Buffer>();

/** The SSE frame of a stream item, built once per object. A live-only item has no `id:` (EventSource keeps the last one for Last-Event-ID). */
export function sseFrame<T extends StreamItem>(item: T, source: Pick<StreamSource<T>, 'event'>): Buffer {
  let frame = frames.get(item);
  if (frame === undefined) {
    const e = source.event(item);
    frame = Buffer.from(
      `${e.id === null ? '' : `id: ${e.id}\n`}event: ${e.event}\ndata: ${e.json ?? JSON.stringify(e.data)}\n\n`,
    );
    frames.set(item, frame);
  }
  return frame;
}

/**
 * The flushes every reader waits for, on shared timers (docs/api.md#the-result-stream-sse): the
 * readers due in this tick share one setImmediate, those due in the same millisecond one
 * setTimeout — a run's ten readers, fed the same results in the same tick, cost one timer
 * between them instead of one each per flush.
 */
class FlushClock {
  private soonTasks = new Set<() => void>();
  /** The process's: a ReleasingMap, so a passed slot's readers are not kept for the scavenger (libs/streams). */
  private readonly slots = new ReleasingMap<number, { tasks: Set<() => void>; timer: NodeJS.Timeout }>();

  /** Runs `task` in the check phase of this turn of the event loop (with every other task due now). */
  soon(task: () => void): void {
    if (this.soonTasks.size === 0) {
      setImmediate(() => {
        const tasks = this.soonTasks;
        this.soonTasks = new Set();
        for (const t of tasks) {
          t();
        }
      });
    }
    this.soonTasks.add(task);
  }

  /** Runs `task` at `due` (performance.now() ms, rounded up to the millisecond); returns its slot for `cancel`. */
  at(due: number, task: () => void): number {
    const slot = Math.ceil(due);
    let entry = this.slots.get(slot);
    if (entry === undefined) {
      const tasks = new Set<() => void>();
      const timer = setTimeout(
        () => {
          // A task cancelled while the others run is skipped; one added for this slot runs now.
          for (const t of tasks) {
            t();
          }
          if (this.slots.get(slot)?.tasks === tasks) {
            this.slots.delete(slot);
          }
        },
        Math.max(0, slot - performance.now()),
      );
      entry = { tasks, timer };
      this.slots.set(slot, entry);
    }
    entry.tasks.add(task);
    return slot;
  }

  cancel(slot: number, task: () => void): void {
    const entry = this.slots.get(slot);
    if (entry !== undefined && entry.tasks.delete(task) && entry.tasks.size === 0) {
      // No task left: the timer goes (when it is running its tasks, clearing it is a no-op).
      clearTimeout(entry.timer);
      this.slots.delete(slot);
    }
  }
}

const clock = new FlushClock();

/**
 * The keep-alive comments of every open reader on one interval per period (docs/api.md#the-result-stream-sse):
 * a reader hears its first comment within `keepAliveMs` of opening and then one every `keepAliveMs`,
 * as with a timer of its own, but opening and ending a stream arm and clear no timer (one each per
 * run at c64 before, docs/benchmarks.md#host-cpu-per-run).
 */
class KeepAliveTicker {
  /** Long-lived, and so is each period's set of readers: releasing ones (libs/streams releasing-map.ts). */
  private readonly periods = new ReleasingMap<number, { tasks: ReleasingSet<() => void>; timer: NodeJS.Timeout }>();

  /** Runs `task` every `periodMs` until the returned function is called. */
  every(periodMs: number, task: () => void): () => void {
    let entry = this.periods.get(periodMs);
    if (entry === undefined) {
      const tasks = new ReleasingSet<() => void>();
      const timer = setInterval(() => {
        for (const t of tasks) {
          t();
        }
      }, periodMs);
      entry = { tasks, timer };
      this.periods.set(periodMs, entry);
    }
    const own = entry;
    const member = own.tasks.add(task);
    return () => {
      if (own.tasks.delete(member) && own.tasks.size === 0) {
        // The last reader of this period went: so does its timer.
        clearInterval(own.timer);
        this.periods.delete(periodMs);
      }
    };
  }
}

const keepAlives = new KeepAliveTicker();

/**
 * Pipes one run's stream (results or delivery ops, docs/api.md#streams) to one SSE reader, with
 * backpressure: replay pages from the database one at a time and only when the socket has drained,
 * then live frames from the run's channel, all frames of one tick in one write. A reader whose
 * unsent backlog passes the bound is disconnected; it resumes with Last-Event-ID. Ends (response
 * ended) after the stream's last item.
 */
export class SseWriter<T extends StreamItem> {
  private sent: number;
  private pending: T[] = [];
  private pendingBytes = 0;
  /** Live frames were dropped during the replay (the replay then reads on). */
  private missedLive = false;
  private replaying = true;
  private liveEnded = false;
  private flushQueued = false;
  /** The pending flush waits for its slot on the clock (the reader wrote less than flushIntervalMs ago). */
  private flushSlot: number | null = null;
  private readonly flushTask = () => this.queuedFlush();
  /** When live frames last left (performance.now()). */
  private lastFlushAt = -Infinity;
  private awaitingDrain = false;
  private finished = false;
  private readonly done: Promise<StreamEnd>;
  private resolveDone!: (end: StreamEnd) => void;
  private readonly frameOf: (item: T) => Buffer;
  private readonly isLast: (item: T) => boolean;

  /**
   * `sendHeaders`: sends the response head if nothing did yet, called after the first replay page
   * so that the head leaves with its frames in one write instead of a write of its own per reader.
   */
  constructor(
    private readonly out: Writable,
    after: number,
    private readonly source: StreamSource<T>,
    private readonly limits: SseLimits,
    private readonly sendHeaders: () => void = () => undefined,
  ) {
    this.sent = after;
    this.frameOf = (item) => sseFrame(item, source);
    this.isLast = (item) => source.isLast(item);
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  /** Runs the stream; resolves with how it ended. */
  run(): Promise<StreamEnd> {
    const stopKeepAlive = keepAlives.every(this.limits.keepAliveMs, () => {
      if (!this.finished && this.out.writableLength === 0) {
        this.out.write(': keep-alive\n\n');
      }
    });
    // Follow first, then replay, so that nothing falls between the two.
    const live = this.source.follow()?.subscribe({
      next: (r) => this.onLive(r),
      complete: () => {
        this.liveEnded = true;
        this.queueFlush(true);
      },
    });
    if (!live) {
      this.liveEnded = true;
    }
    this.out.once('close', () => this.finish('closed'));
    void this.done.then(() => {
      stopKeepAlive();
      if (this.flushSlot !== null) {
        clock.cancel(this.flushSlot, this.flushTask);
      }
      live?.unsubscribe();
    });
    this.replay().catch(() => this.finish('failed'));
    return this.done;
  }

  private async replay(): Promise<void> {
    let limit = FIRST_PAGE;
    for (;;) {
      this.missedLive = false;
      const rows = await this.source.page(this.sent, limit);
      if (this.finished) {
        return;
      }
      this.dropPendingUpTo(rows.length > 0 ? rows[rows.length - 1].sequence : this.sent);
      const written = this.writeFrames(rows);
      if (limit === FIRST_PAGE) {
        this.sendHeaders();
      }
      if (written < 0 || (this.awaitingDrain && !(await this.drained()))) {
        return;
      }
      // Live frames dropped while this page was read are in the database: read on for them.
      if (rows.length < limit && !this.missedLive) {
        break;
      }
      // Large results: fewer rows per page; small ones: more. The largest row of this page is the
      // best guess for the next one (cumulative deltas only grow).
      const largest = Math.max(1, ...rows.map((r) => this.frameOf(r).length));
      limit = Math.min(MAX_PAGE, Math.max(1, Math.floor(PAGE_TARGET_BYTES / largest)));
    }
    this.replaying = false;
    this.queueFlush(true);
  }

  private onLive(r: T): void {
    if (r.ephemeral) {
      // Live telemetry is lossy: a reader that is replaying or behind does not get it.
      if (!this.finished && !this.replaying && !this.awaitingDrain) {
        this.pending.push(r);
        this.queueFlush();
      }
      return;
    }
    if (this.finished || r.sequence <= this.sent) {
      return;
    }
    this.pending.push(r);
    this.pendingBytes += this.frameOf(r).length;
    if (this.replaying) {
      // A reader of stored results is paced (the next page waits for 'drain'), never cut: what
      // its socket holds is the replay's own page, not a live backlog. Past the bound, the live
      // frames are dropped: every published result is committed, the replay reads them instead.
      if (this.pendingBytes > this.limits.maxBacklogBytes) {
        this.pending = [];
        this.pendingBytes = 0;
        this.missedLive = true;
      }
      return;
    }
    // Behind = the socket refuses more (awaiting 'drain') and the queue passed the bound; frames of
    // a tick that the socket takes are not a backlog.
    if (this.awaitingDrain && this.pendingBytes + this.out.writableLength > this.limits.maxBacklogBytes) {
      // The reader does not keep up: cut it rather than hold the run in memory for it.
      this.finish('cut');
      this.out.destroy();
      return;
    }
    if (!this.awaitingDrain && this.pendingBytes > this.limits.maxBacklogBytes) {
      // A burst (many results in one tick, as when the loop was busy) leaves in pieces of at most
      // the bound rather than as one write per reader of everything that arrived: the socket
      // then says whether the reader keeps up before more is queued for it.
      this.flush();
      return;
    }
    if (this.isLast(r)) {
      this.flushLast();
      return;
    }
    this.queueFlush();
  }

  /**
   * The stream's last frame was published: nothing can join its write any more, so it leaves now,
   * in the publisher's turn, with every frame still waiting (one write) — not one check phase
   * later, after whatever else that turn runs (docs/benchmarks.md, "The c1 critical path").
   */
  private flushLast(): void {
    if (this.flushSlot !== null) {
      clock.cancel(this.flushSlot, this.flushTask);
      this.flushSlot = null;
      this.flushQueued = false;
    }
    this.flush();
  }

  /**
   * Live frames arriving in the same tick leave in one write; within flushIntervalMs of the last
   * write, they wait for the interval to pass — unless `now` (the stream's last frame, the end of
   * the replay or of the live stream), which leaves in this tick with everything waiting.
   */
  private queueFlush(now = false): void {
    const interval = this.limits.flushIntervalMs ?? 0;
    const wait = now || interval <= 0 ? 0 : this.lastFlushAt + interval - performance.now();
    if (wait > 0) {
      if (!this.flushQueued) {
        this.flushQueued = true;
        this.flushSlot = clock.at(this.lastFlushAt + interval, this.flushTask);
      }
      return;
    }
    if (this.flushSlot !== null) {
      clock.cancel(this.flushSlot, this.flushTask); // the waiting frames leave in this tick instead
      this.flushSlot = null;
      this.flushQueued = false;
    }
    if (!this.flushQueued) {
      this.flushQueued = true;
      clock.soon(this.flushTask);
    }
  }

  private queuedFlush(): void {
    this.flushQueued = false;
    this.flushSlot = null;
    this.flush();
  }

  private flush(): void {
    if (this.finished || this.replaying || this.awaitingDrain) {
      return;
    }
    const rows = this.pending.filter((r) => r.ephemeral || r.sequence > this.sent);
    this.pending = [];
    this.pendingBytes = 0;
    const written = this.writeFrames(rows);
    if (written < 0) {
      return;
    }
    if (written > 0) {
      this.lastFlushAt = performance.now();
    }
    if (this.awaitingDrain) {
      void this.drained().then((ok) => ok && this.flush());
      return;
    }
    if (this.liveEnded) {
      // The run ended without a terminal result reaching this reader (e.g. it ended elsewhere).
      this.finish('completed');
      this.out.end();
    }
  }

  /** Writes frames in one write; the bytes written, or -1 when the stream is over (terminal written or closed). */
  private writeFrames(rows: T[]): number {
    if (this.finished) {
      return -1;
    }
    const parts: Buffer[] = [];
    let bytes = 0;
    let terminal = false;
    for (const r of rows) {
      if (!r.ephemeral) {
        if (r.sequence <= this.sent) {
          continue;
        }
        this.sent = r.sequence;
      }
      const frame = this.frameOf(r);
      parts.push(frame);
      bytes += frame.length;
      if (!r.ephemeral && this.isLast(r)) {
        terminal = true;
        break;
      }
    }
    if (bytes > 0 && !this.out.write(parts.length === 1 ? parts[0] : Buffer.concat(parts, bytes))) {
      this.awaitingDrain = true;
    }
    if (terminal) {
      this.finish('completed');
      this.out.end();
      return -1;
    }
    return bytes;
  }

  /** Resolves true on 'drain', false when the stream ended first. */
  private drained(): Promise<boolean> {
    if (!this.awaitingDrain) {
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const onDrain = () => {
        this.out.off('close', onClose);
        this.awaitingDrain = false;
        resolve(!this.finished);
      };
      const onClose = () => {
        this.out.off('drain', onDrain);
        resolve(false);
      };
      this.out.once('drain', onDrain);
      this.out.once('close', onClose);
    });
  }

  private dropPendingUpTo(sequence: number): void {
    if (this.pending.length > 0 && this.pending[0].sequence <= sequence) {
      this.pending = this.pending.filter((r) => r.sequence > sequence);
      this.pendingBytes = this.pending.reduce((n, r) => n + this.frameOf(r).length, 0);
    }
  }

  private finish(end: StreamEnd): void {
    if (!this.finished) {
      this.finished = true;
      this.resolveDone(end);
    }
  }
}
