import { EventEmitter } from 'node:events';
import type { Writable } from 'node:stream';
import { Subject } from 'rxjs';
import { RESULT_EVENTS, type ResultView } from '@libs/runs';
import type { StreamEnd } from '@libs/streams';
import { SseWriter, sseFrame } from './sse-writer';

/** A socket stand-in: records writes; `full` makes write() return false until drain(). */
class FakeSocket extends EventEmitter {
  writes: string[] = [];
  full = false;
  writableLength = 0;
  ended = false;
  destroyed = false;

  write(chunk: string | Buffer): boolean {
    const text = typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    this.writes.push(text);
    if (this.full) {
      this.writableLength += Buffer.byteLength(text);
    }
    return !this.full;
  }
  drain(): void {
    this.full = false;
    this.writableLength = 0;
    this.emit('drain');
  }
  end(): void {
    this.ended = true;
    this.emit('close');
  }
  destroy(): void {
    this.destroyed = true;
    this.emit('close');
  }
  ids(): number[] {
    return [...this.writes.join('').matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  }
}

const result = (sequence: number, type = 'message.delta', size = 10): ResultView => ({
  run_id: 'r1',
  sequence,
  type,
  data: { chunk: { content: 'x'.repeat(size) } },
  usage: null,
  source: 'runner',
  timestamp: null,
});

function setup(
  stored: ResultView[],
  live: Subject<ResultView> | null,
  after = 0,
  maxBacklogBytes = 1 << 20,
  flushIntervalMs = 0,
) {
  const socket = new FakeSocket();
  const pages: [number, number][] = [];
  const source = {
    ...RESULT_EVENTS,
    follow: () => live?.asObservable() ?? null,
    page: (cursor: number, limit: number) => {
      pages.push([cursor, limit]);
      return Promise.resolve(stored.filter((r) => r.sequence > cursor).slice(0, limit));
    },
  };
  const stream = new SseWriter(socket as unknown as Writable, after, source, {
    maxBacklogBytes,
    keepAliveMs: 60_000,
    flushIntervalMs,
  });
  const done: Promise<StreamEnd> = stream.run();
  return { socket, pages, done };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('SseWriter', () => {
  it('replays a finished run page by page after `after` and ends after the terminal result', async () => {
    const stored = [...Array.from({ length: 40 }, (_, i) => result(i + 1)), result(41, 'run.completed')];
    const { socket, pages, done } = setup(stored, null, 5);
    expect(await done).toBe('completed');
    expect(socket.ids()).toEqual(Array.from({ length: 36 }, (_, i) => i + 6));
    expect(socket.ended).toBe(true);
    expect(pages.length).toBeGreaterThan(1);
    expect(pages[0]).toEqual([5, 16]);
  });

  it('reads the next replay page only after the socket drained', async () => {
    const stored = [...Array.from({ length: 40 }, (_, i) => result(i + 1)), result(41, 'run.completed')];
    const { socket, pages, done } = setup(stored, null);
    socket.full = true; // before the first page is written (it is read asynchronously)
    await tick();
    await tick();
    expect(pages).toHaveLength(1);
    expect(socket.writes).toHaveLength(1);
    socket.drain();
    await tick();
    expect(pages.length).toBeGreaterThan(1);
    while (!socket.ended) {
      socket.drain();
      await tick();
    }
    expect(await done).toBe('completed');
    expect(socket.ids()).toEqual(Array.from({ length: 41 }, (_, i) => i + 1));
  });

  it('follows live results after the replay, skipping what was replayed, frames of one tick in one write', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([result(1), result(2)], live);
    live.next(result(2)); // already in the replay
    await tick();
    await tick();
    const before = socket.writes.length;
    live.next(result(3));
    live.next(result(4));
    live.next(result(5, 'run.failed'));
    live.next(result(6)); // after the terminal result: never sent
    expect(await done).toBe('completed');
    expect(socket.writes.length).toBe(before + 1);
    expect(socket.ids()).toEqual([1, 2, 3, 4, 5]);
  });

  it('writes the terminal frame in the turn it is published, with the frames of that turn, in one write', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([], live);
    await tick();
    await tick();
    const before = socket.writes.length;
    live.next(result(1));
    live.next(result(2, 'run.completed'));
    // No turn of the event loop in between: the stream's last frame does not wait for the check phase.
    expect(socket.writes.length).toBe(before + 1);
    expect(socket.ids()).toEqual([1, 2]);
    expect(socket.ended).toBe(true);
    expect(await done).toBe('completed');
  });

  it('with a flush interval: the first live frame leaves at once, later ones wait for the interval, the terminal one takes them all at once', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([], live, 0, 1 << 20, 60_000);
    await tick();
    await tick();
    live.next(result(1));
    await tick();
    expect(socket.ids()).toEqual([1]); // after a pause: at once
    live.next(result(2));
    await tick();
    live.next(result(3));
    await tick();
    expect(socket.ids()).toEqual([1]); // within the interval: waiting
    const writes = socket.writes.length;
    live.next(result(4, 'run.completed'));
    expect(await done).toBe('completed');
    expect(socket.writes.length).toBe(writes + 1); // 2, 3 and the terminal result in one write
    expect(socket.ids()).toEqual([1, 2, 3, 4]);
  });

  it('with a flush interval: waiting live frames leave together once the interval passed', async () => {
    const live = new Subject<ResultView>();
    const { socket } = setup([], live, 0, 1 << 20, 30);
    await tick();
    await tick();
    live.next(result(1));
    await tick();
    live.next(result(2));
    live.next(result(3));
    await tick();
    expect(socket.ids()).toEqual([1]);
    const writes = socket.writes.length;
    await new Promise((r) => setTimeout(r, 60)); // set after the flush timer (≤ 30 ms): fires after it
    expect(socket.writes.length).toBe(writes + 1);
    expect(socket.ids()).toEqual([1, 2, 3]);
    live.next(result(4, 'run.completed'));
    live.complete();
  });

  it('ten readers of one run share one timer per flush and each gets every frame, the same bytes', async () => {
    const live = new Subject<ResultView>();
    const readers = Array.from({ length: 10 }, () => setup([], live, 0, 1 << 20, 30));
    await tick();
    await tick();
    // One clock reading for the readers' flushes: a loaded machine must not spread ten flushes of
    // one tick over two millisecond slots (two timers are right then, but not what is asserted).
    const now = jest.spyOn(performance, 'now').mockReturnValue(performance.now());
    const timers = jest.spyOn(global, 'setTimeout');
    const immediates = jest.spyOn(global, 'setImmediate');
    try {
      live.next(result(1)); // the first frame after a pause leaves at once
      await tick();
      timers.mockClear();
      immediates.mockClear();
      live.next(result(2));
      live.next(result(3));
      await tick();
      expect(timers).toHaveBeenCalledTimes(1); // the readers' held frames: one timer for all ten
      expect(immediates.mock.calls.length).toBeLessThanOrEqual(1); // (tick's own)
    } finally {
      timers.mockRestore();
      immediates.mockRestore();
      now.mockRestore();
    }
    await new Promise((r) => setTimeout(r, 60));
    live.next(result(4, 'run.completed'));
    live.complete();
    for (const r of readers) {
      expect(await r.done).toBe('completed');
      expect(r.socket.ids()).toEqual([1, 2, 3, 4]);
      expect(r.socket.writes.length).toBe(3); // 1 at once, 2–3 after the interval, the terminal at once
    }
    expect(readers[0].socket.writes.join('')).toBe(readers[9].socket.writes.join(''));
  });

  it('holds live frames while the socket has not drained, then sends them in one write', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([], live);
    await tick();
    socket.full = true;
    live.next(result(1));
    await tick();
    live.next(result(2));
    live.next(result(3));
    await tick();
    expect(socket.ids()).toEqual([1]);
    socket.drain();
    await tick();
    expect(socket.ids()).toEqual([1, 2, 3]);
    expect(socket.writes).toHaveLength(2);
    live.complete();
    expect(await done).toBe('completed');
  });

  it('cuts a reader whose socket refuses more while its unsent backlog passes the bound', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([], live, 0, 64 * 1024);
    await tick();
    socket.full = true;
    live.next(result(1, 'message.delta', 8 * 1024));
    await tick(); // written: the socket now awaits 'drain'
    for (let i = 2; i <= 20; i++) {
      live.next(result(i, 'message.delta', 8 * 1024));
    }
    expect(await done).toBe('cut');
    expect(socket.destroyed).toBe(true);
    expect(live.observed).toBe(false); // unsubscribed
  });

  it('does not cut a reader for a burst its socket takes in one write', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([], live, 0, 64 * 1024);
    await tick();
    for (let i = 1; i <= 20; i++) {
      live.next(result(i, 'message.delta', 8 * 1024));
    }
    await tick();
    expect(socket.destroyed).toBe(false);
    expect(socket.ids()).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    live.complete();
    expect(await done).toBe('completed');
  });

  it('ends when the live channel completes without a terminal result (the run ended elsewhere)', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([result(1)], live);
    await tick();
    live.complete();
    expect(await done).toBe('completed');
    expect(socket.ended).toBe(true);
    expect(socket.ids()).toEqual([1]);
  });
});

describe('SseWriter and live-only telemetry', () => {
  const progress = (sequence: number): ResultView => ({
    ...result(sequence, 'tool.call.progress'),
    data: { tool_name: 't', progress: 1, total: 2 },
    source: 'host',
    ephemeral: true,
  });

  it('sends ephemeral frames live without an id, and never advances the sequence with them', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([], live, 0);
    await tick();
    await tick();
    live.next(progress(0));
    live.next(result(1));
    live.next(progress(1));
    live.next(result(2, 'run.completed'));
    live.complete();
    expect(await done).toBe('completed');
    const text = socket.writes.join('');
    expect(socket.ids()).toEqual([1, 2]);
    expect(text.match(/event: tool\.call\.progress\ndata: /g)).toHaveLength(2);
    expect(text).not.toMatch(/id: 0/);
    expect(text.indexOf('tool.call.progress')).toBeLessThan(text.indexOf('id: 1'));
  });

  it('drops ephemeral frames for a reader that is behind instead of queueing them', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([], live, 0);
    await tick();
    await tick();
    socket.full = true;
    live.next(result(1));
    await tick();
    live.next(progress(1));
    socket.drain();
    live.next(result(2, 'run.completed'));
    live.complete();
    expect(await done).toBe('completed');
    expect(socket.ids()).toEqual([1, 2]);
    expect(socket.writes.join('')).not.toContain('tool.call.progress');
  });

  it('never cuts a reader while it replays stored results, however slowly it reads (a resume of a live run)', async () => {
    // Stored: 8 results of 48 KiB; the reader resumes while the run is still live. Its first replay
    // page fills the socket (awaiting 'drain', ~384 KiB unsent, over the 64 KiB bound); live
    // frames arriving meanwhile must not cut it: stored results are paced, not cut.
    const stored = Array.from({ length: 8 }, (_, i) => result(i + 1, 'message.delta', 48 * 1024));
    const live = new Subject<ResultView>();
    const { socket, done } = setup(stored, live, 0, 64 * 1024);
    socket.full = true;
    await tick();
    await tick();
    expect(socket.writableLength).toBeGreaterThan(64 * 1024);
    live.next(result(9, 'message.delta', 1024));
    live.next(result(10, 'message.delta', 1024));
    await tick();
    expect(socket.destroyed).toBe(false);
    stored.push(result(9, 'message.delta', 1024), result(10, 'message.delta', 1024));
    socket.drain();
    await tick();
    await tick();
    stored.push(result(11, 'run.completed'));
    live.next(result(11, 'run.completed'));
    live.complete();
    while (!socket.ended && !socket.destroyed) {
      socket.drain();
      await tick();
    }
    expect(await done).toBe('completed');
    expect(socket.ids()).toEqual(Array.from({ length: 11 }, (_, i) => i + 1));
  });

  it('writes a burst in pieces of at most the bound, and cuts the reader once its socket refuses more', async () => {
    const live = new Subject<ResultView>();
    const { socket, done } = setup([], live, 0, 64 * 1024);
    await tick();
    await tick();
    socket.full = true; // a reader that has stopped reading
    // 200 results of 8 KiB in one tick (1.6 MB): without pieces, one 1.6 MB write would be queued.
    for (let i = 1; i <= 200; i++) {
      live.next(result(i, 'message.delta', 8 * 1024));
    }
    expect(await done).toBe('cut');
    expect(Math.max(...socket.writes.map((w) => w.length))).toBeLessThan(80 * 1024);
    expect(socket.writes.join('').length).toBeLessThan(200 * 1024);
  });
});

describe('SseWriter keep-alive', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const open = (socket: FakeSocket, live: Subject<ResultView>) =>
    new SseWriter(
      socket as unknown as Writable,
      0,
      { ...RESULT_EVENTS, follow: () => live.asObservable(), page: () => Promise.resolve([]) },
      { maxBacklogBytes: 1 << 20, keepAliveMs: 1_000 },
    ).run();
  const comments = (s: FakeSocket) => s.writes.filter((w) => w === ': keep-alive\n\n').length;

  it('idle readers hear a comment every period on one shared timer, which goes with the last reader', async () => {
    const timersBefore = jest.getTimerCount();
    const [a, b] = [new FakeSocket(), new FakeSocket()];
    const [liveA, liveB] = [new Subject<ResultView>(), new Subject<ResultView>()];
    const doneA = open(a, liveA);
    jest.advanceTimersByTime(400);
    const doneB = open(b, liveB);
    await jest.advanceTimersByTimeAsync(0);
    expect(jest.getTimerCount()).toBe(timersBefore + 1);

    await jest.advanceTimersByTimeAsync(600); // the period's first tick: both are idle
    expect([comments(a), comments(b)]).toEqual([1, 1]);
    await jest.advanceTimersByTimeAsync(1_000);
    expect([comments(a), comments(b)]).toEqual([2, 2]);

    a.full = true; // a reader whose socket still holds bytes gets no comment on top
    a.writableLength = 1;
    await jest.advanceTimersByTimeAsync(1_000);
    expect([comments(a), comments(b)]).toEqual([2, 3]);

    a.destroy();
    expect(await doneA).toBe('closed');
    expect(jest.getTimerCount()).toBe(timersBefore + 1);
    liveB.next(result(1, 'run.completed'));
    await jest.advanceTimersByTimeAsync(0);
    expect(await doneB).toBe('completed');
    expect(jest.getTimerCount()).toBe(timersBefore);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(comments(b)).toBe(3);
  });
});

describe('sseFrame', () => {
  it("uses the event's JSON text when the source serialised its data already, else serialises it", () => {
    const item = { sequence: 4 };
    const data = { text: 'a "b"', part: 0 };
    const fromJson = sseFrame(item, {
      event: () => ({ id: 4, event: 'message.final', data, json: '{"as":"written"}' }),
    });
    expect(fromJson.toString('utf8')).toBe('id: 4\nevent: message.final\ndata: {"as":"written"}\n\n');
    const other = { sequence: 5 };
    const plain = sseFrame(other, { event: () => ({ id: 5, event: 'message.final', data }) });
    expect(plain.toString('utf8')).toBe(`id: 5\nevent: message.final\ndata: ${JSON.stringify(data)}\n\n`);
  });
});
