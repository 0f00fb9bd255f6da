import { Observable, Subject } from 'rxjs';

/** What a follow from the database reads: a run's committed items after a cursor, and whether it ended. */
export interface FollowedRows<T> {
  /** Committed items of the run with sequence > after, in sequence order, at most `limit`. */
  read(runId: string, after: number, limit: number): Promise<T[]>;
  /** Whether the run has ended: then every item of it is committed. */
  ended(runId: string): Promise<boolean>;
  /** An item after which the stream ends (a terminal result). */
  isLast(item: T): boolean;
}

export interface FollowOptions {
  /** The poll behind the `results` signal: each followed run is read at least this often (ms). */
  pollMs: number;
  /** Poll ticks that read nothing between two checks of the run's end (the end of a stream with no last item). */
  endCheckEvery: number;
  onError: (runId: string, e: unknown) => void;
  /**
   * Told when a run is first followed here and at each poll tick while it is: the owner sends a
   * run's `results` signals only while some process announces it follows the run (FollowInterest).
   */
  announce?: (runId: string) => void;
}

/** Rows per read while catching up. */
export const FOLLOW_PAGE = 256;

interface Follower<T> {
  readonly subject: Subject<T>;
  /** The highest sequence handed to the readers. */
  cursor: number;
  readers: number;
  timer: NodeJS.Timeout;
  reading: boolean;
  /** A wake came during a read: read again after it (`poll`: one of them was the poll tick). */
  again: false | 'signal' | 'poll';
  idleTicks: number;
  closed: boolean;
}

/**
 * Live follow of runs active in another process (docs/scale-out.md#everything-from-anywhere): the
 * committed rows after a cursor, read again at each `results` signal of the run (`wake`) or poll
 * tick, handed to every reader of the run in this process. One follower per run however many
 * readers: one read per run per wake. Its readers replay from the database themselves (as they do
 * with the owner's channel), so the follower starts at the first reader's position and hands out
 * only what comes after; a later reader finds it further on, and what lies between was committed
 * before that reader subscribed, so its replay reads it. It ends after the last item, or when the
 * run has ended and nothing is left.
 */
export class DatabaseFollows<T extends { run_id: string; sequence: number }> {
  private readonly followers = new Map<string, Follower<T>>();

  constructor(
    private readonly rows: FollowedRows<T>,
    private readonly options: FollowOptions,
  ) {}

  /** Items of the run committed after `after`, as they are committed; completes after the stream's last one. */
  follow(runId: string, after: number): Observable<T> {
    return new Observable<T>((subscriber) => {
      let f = this.followers.get(runId);
      if (!f) {
        const created: Follower<T> = {
          subject: new Subject<T>(),
          cursor: after,
          readers: 0,
          timer: setInterval(() => {
            this.options.announce?.(runId);
            void this.read(runId, created, 'poll');
          }, this.options.pollMs),
          reading: false,
          again: false,
          idleTicks: 0,
          closed: false,
        };
        created.timer.unref();
        this.followers.set(runId, created);
        f = created;
        this.options.announce?.(runId);
      }
      const follower = f;
      follower.readers++;
      const subscription = follower.subject.subscribe(subscriber);
      return () => {
        subscription.unsubscribe();
        follower.readers--;
        if (follower.readers === 0) {
          this.close(runId, follower);
        }
      };
    });
  }

  /** The run committed rows (its `results` signal): its follower, if any, reads after its cursor. */
  wake(runId: string): void {
    const f = this.followers.get(runId);
    if (f) {
      void this.read(runId, f, 'signal');
    }
  }

  /** Runs followed in this process (telemetry, tests). */
  size(): number {
    return this.followers.size;
  }

  /** Ends every follow (shutdown): readers see their stream end and resume elsewhere with Last-Event-ID. */
  closeAll(): void {
    for (const [runId, f] of this.followers) {
      this.close(runId, f);
      f.subject.complete();
    }
  }

  private async read(runId: string, f: Follower<T>, why: 'signal' | 'poll'): Promise<void> {
    if (f.closed) {
      return;
    }
    if (f.reading) {
      f.again = f.again === 'poll' || why === 'poll' ? 'poll' : 'signal';
      return;
    }
    f.reading = true;
    try {
      const got = await this.readOn(runId, f);
      if (got === 'last' || f.closed) {
        return;
      }
      if (got > 0) {
        f.idleTicks = 0;
      } else if (why === 'poll' && ++f.idleTicks >= this.options.endCheckEvery) {
        f.idleTicks = 0;
        // Ended: its last rows were committed with its end; read them, then the stream is over.
        if ((await this.rows.ended(runId)) && !f.closed && (await this.readOn(runId, f)) !== 'last') {
          this.complete(runId, f);
        }
      }
    } catch (e) {
      // The next wake or poll tick reads again.
      this.options.onError(runId, e);
    } finally {
      f.reading = false;
    }
    if (f.again && !f.closed) {
      const again = f.again;
      f.again = false;
      void this.read(runId, f, again);
    }
  }

  /** Reads and hands out every row after the cursor: their count, or 'last' when the stream ended. */
  private async readOn(runId: string, f: Follower<T>): Promise<number | 'last'> {
    let n = 0;
    for (;;) {
      const rows = await this.rows.read(runId, f.cursor, FOLLOW_PAGE);
      if (f.closed) {
        return n;
      }
      for (const row of rows) {
        if (row.sequence <= f.cursor) {
          continue;
        }
        f.cursor = row.sequence;
        n++;
        f.subject.next(row);
        if (f.closed) {
          return n;
        }
        if (this.rows.isLast(row)) {
          this.complete(runId, f);
          return 'last';
        }
      }
      if (rows.length < FOLLOW_PAGE) {
        return n;
      }
    }
  }

  private complete(runId: string, f: Follower<T>): void {
    this.close(runId, f);
    f.subject.complete();
  }

  private close(runId: string, f: Follower<T>): void {
    if (!f.closed) {
      f.closed = true;
      clearInterval(f.timer);
      if (this.followers.get(runId) === f) {
        this.followers.delete(runId);
      }
    }
  }
}

/** Poll periods a `follow` announcement lasts at the owner: two announcements may be lost. */
export const FOLLOW_INTEREST_POLLS = 3;

/**
 * The runs some process follows from the database (docs/scale-out.md#everything-from-anywhere-reads-cancel-steering),
 * as their `follow` announcements tell: each lasts FOLLOW_INTEREST_POLLS poll periods, renewed by
 * the follower at each of its poll ticks. Only a wake-up depends on it: a follower reads at every
 * poll tick whatever signals it gets.
 */
export class FollowInterest {
  private readonly until = new Map<string, number>();
  private sweptAt = 0;

  constructor(
    private readonly pollMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** A process announced it follows the run: true when nobody followed it (as far as known here). */
  noted(runId: string): boolean {
    const now = this.now();
    const fresh = !this.followed(runId, now);
    this.until.set(runId, now + FOLLOW_INTEREST_POLLS * this.pollMs);
    if (now - this.sweptAt >= this.pollMs) {
      // Expired announcements go at most once per poll period: the map holds only runs followed lately.
      this.sweptAt = now;
      for (const [id, until] of this.until) {
        if (until <= now) {
          this.until.delete(id);
        }
      }
    }
    return fresh;
  }

  /** Whether some process announced it follows the run within the last FOLLOW_INTEREST_POLLS poll periods. */
  followed(runId: string, now = this.now()): boolean {
    return (this.until.get(runId) ?? 0) > now;
  }

  /** Runs known as followed (telemetry, tests); expired ones may still be counted until the next sweep. */
  size(): number {
    return this.until.size;
  }
}

/**
 * Coalesces the `results` signals of a run's owner: at most one per run per turn of the event
 * loop, where one commit group resolves the writes of all its units, and only for runs another
 * process follows (`followed`): a `NOTIFY` per run per commit costs every commit of the database
 * (docs/scale-out.md#everything-from-anywhere-reads-cancel-steering).
 */
export class CommitSignals {
  private readonly pending = new Set<string>();

  constructor(
    private readonly send: (runId: string) => void,
    private readonly followed: (runId: string) => boolean = () => true,
  ) {}

  /** Rows of the run were committed. */
  committed(runId: string): void {
    if (!this.followed(runId)) {
      return;
    }
    if (this.pending.size === 0) {
      setImmediate(() => this.flush());
    }
    this.pending.add(runId);
  }

  private flush(): void {
    const ids = [...this.pending];
    this.pending.clear();
    for (const id of ids) {
      this.send(id);
    }
  }
}
