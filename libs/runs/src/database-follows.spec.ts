import { setTimeout as sleep } from 'node:timers/promises';
import {
  CommitSignals,
  DatabaseFollows,
  FOLLOW_INTEREST_POLLS,
  FOLLOW_PAGE,
  FollowInterest,
  type FollowedRows,
} from './database-follows';

interface Row {
  run_id: string;
  sequence: number;
  last?: true;
}

/** A run's committed rows, as the database holds them; counts the reads. */
class Table implements FollowedRows<Row> {
  readonly rows: Row[] = [];
  reads = 0;
  endChecks = 0;
  over = false;

  commit(...sequences: number[]): void {
    for (const sequence of sequences) {
      this.rows.push({ run_id: 'r', sequence });
    }
  }

  read(runId: string, after: number, limit: number): Promise<Row[]> {
    this.reads++;
    return Promise.resolve(this.rows.filter((r) => r.run_id === runId && r.sequence > after).slice(0, limit));
  }

  ended(): Promise<boolean> {
    this.endChecks++;
    return Promise.resolve(this.over);
  }

  isLast(row: Row): boolean {
    return row.last === true;
  }
}

const settle = () => sleep(5);

/** Waits until `cond` holds (each poll tick is a few ms; the test's own timeout bounds it). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) {
    await sleep(5);
  }
}

function reader(follows: DatabaseFollows<Row>, after: number) {
  const seen: number[] = [];
  let completed = false;
  const sub = follows.follow('r', after).subscribe({
    next: (r) => seen.push(r.sequence),
    complete: () => (completed = true),
  });
  return { seen, done: () => completed, sub };
}

describe('DatabaseFollows', () => {
  const options = { pollMs: 60_000, endCheckEvery: 1, onError: () => {} };

  it('reads once per wake however many readers, and hands each what was committed after the cursor', async () => {
    const table = new Table();
    table.commit(1, 2);
    const follows = new DatabaseFollows(table, options);
    const a = reader(follows, 2);
    const b = reader(follows, 0);
    expect(follows.size()).toBe(1);
    table.commit(3, 4);
    follows.wake('r');
    await settle();
    expect(table.reads).toBe(1);
    expect(a.seen).toEqual([3, 4]);
    expect(b.seen).toEqual([3, 4]); // 1 and 2 were committed before b subscribed: its replay reads them
    follows.wake('other');
    await settle();
    expect(table.reads).toBe(1);
  });

  it('catches up page by page and ends every reader after the last item', async () => {
    const table = new Table();
    const follows = new DatabaseFollows(table, options);
    const a = reader(follows, 0);
    for (let i = 1; i <= FOLLOW_PAGE + 3; i++) {
      table.commit(i);
    }
    table.rows.push({ run_id: 'r', sequence: FOLLOW_PAGE + 4, last: true });
    follows.wake('r');
    await settle();
    expect(a.seen).toHaveLength(FOLLOW_PAGE + 4);
    expect(a.done()).toBe(true);
    expect(follows.size()).toBe(0);
  });

  it('reads again after a wake that came during a read (nothing committed meanwhile is left behind)', async () => {
    const table = new Table();
    const follows = new DatabaseFollows(table, options);
    const a = reader(follows, 0);
    table.commit(1);
    follows.wake('r');
    table.commit(2);
    follows.wake('r'); // arrives while the first read is in flight
    await settle();
    expect(a.seen).toEqual([1, 2]);
  });

  it('polls without any signal, and ends a stream without a last item once the run ended', async () => {
    const table = new Table();
    const follows = new DatabaseFollows(table, { ...options, pollMs: 10 });
    const a = reader(follows, 0);
    table.commit(1);
    await until(() => a.seen.length === 1 && table.endChecks > 0);
    expect(a.seen).toEqual([1]);
    expect(a.done()).toBe(false);
    table.commit(2);
    table.over = true;
    await until(() => a.done());
    expect(a.seen).toEqual([1, 2]);
    expect(a.done()).toBe(true);
    expect(follows.size()).toBe(0);
  });

  it('checks the end only every endCheckEvery idle poll ticks, and stops when its last reader leaves', async () => {
    const table = new Table();
    const follows = new DatabaseFollows(table, { ...options, pollMs: 5, endCheckEvery: 1_000 });
    const a = reader(follows, 0);
    await until(() => table.reads >= 5);
    expect(table.endChecks).toBe(0);
    a.sub.unsubscribe();
    expect(follows.size()).toBe(0);
    const reads = table.reads;
    await sleep(30);
    expect(table.reads).toBe(reads);
  });

  it('a read that fails is reported and read again at the next wake', async () => {
    const table = new Table();
    const errors: unknown[] = [];
    const follows = new DatabaseFollows(table, { ...options, onError: (_r, e) => errors.push(e) });
    const a = reader(follows, 0);
    const read = table.read.bind(table);
    table.read = () => Promise.reject(new Error('connection lost'));
    table.commit(1);
    follows.wake('r');
    await settle();
    expect(errors).toHaveLength(1);
    table.read = read;
    follows.wake('r');
    await settle();
    expect(a.seen).toEqual([1]);
  });
});

describe('CommitSignals', () => {
  it('sends at most one signal per run per turn of the event loop', async () => {
    const sent: string[] = [];
    const signals = new CommitSignals((runId) => sent.push(runId));
    signals.committed('a');
    signals.committed('a');
    signals.committed('b');
    expect(sent).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual(['a', 'b']);
    signals.committed('a');
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual(['a', 'b', 'a']);
  });
});

describe('CommitSignals of followed runs only', () => {
  it('sends nothing for a run nobody follows', async () => {
    const sent: string[] = [];
    const followed = new Set(['a']);
    const signals = new CommitSignals(
      (runId) => sent.push(runId),
      (runId) => followed.has(runId),
    );
    signals.committed('a');
    signals.committed('b');
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual(['a']);
    followed.add('b');
    signals.committed('b');
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual(['a', 'b']);
  });
});

describe('FollowInterest', () => {
  it('holds an announcement for FOLLOW_INTEREST_POLLS poll periods, renewed by the next one', () => {
    let now = 1_000;
    const interest = new FollowInterest(100, () => now);
    expect(interest.followed('r')).toBe(false);
    expect(interest.noted('r')).toBe(true);
    expect(interest.noted('r')).toBe(false); // already followed: not new
    now += FOLLOW_INTEREST_POLLS * 100 - 1;
    expect(interest.followed('r')).toBe(true);
    expect(interest.noted('r')).toBe(false); // renewed from here
    now += FOLLOW_INTEREST_POLLS * 100 - 1;
    expect(interest.followed('r')).toBe(true);
    now += 1;
    expect(interest.followed('r')).toBe(false);
    expect(interest.noted('r')).toBe(true); // followed again after it lapsed: new
  });

  it('forgets expired announcements at the next one, at most once per poll period', () => {
    let now = 0;
    const interest = new FollowInterest(100, () => now);
    for (let i = 0; i < 50; i++) {
      interest.noted(`run-${i}`);
    }
    expect(interest.size()).toBe(50);
    now += FOLLOW_INTEREST_POLLS * 100;
    interest.noted('fresh');
    expect(interest.size()).toBe(1);
  });
});

describe('DatabaseFollows announcements', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('announces a run when its first reader follows it and at each poll tick, not per reader', () => {
    const announced: string[] = [];
    const follows = new DatabaseFollows(new Table(), {
      pollMs: 1000,
      endCheckEvery: 100,
      onError: () => {},
      announce: (runId) => announced.push(runId),
    });
    const a = follows.follow('r', 0).subscribe();
    const b = follows.follow('r', 0).subscribe();
    expect(announced).toEqual(['r']);
    jest.advanceTimersByTime(2000);
    expect(announced).toEqual(['r', 'r', 'r']);
    a.unsubscribe();
    b.unsubscribe();
    jest.advanceTimersByTime(5000);
    expect(announced).toEqual(['r', 'r', 'r']); // no reader left: no follower, no announcement
  });
});
