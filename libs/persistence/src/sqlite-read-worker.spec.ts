import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import type { Worker } from 'node:worker_threads';
import { defaultReadWorkers, SqliteReadWorker } from './sqlite-read-worker';

describe('SqliteReadWorker', () => {
  let dir: string;
  let file: string;
  let db: Database.Database;
  let worker: SqliteReadWorker;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'read-worker-'));
    file = path.join(dir, 'host.sqlite');
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    db.prepare('INSERT INTO t (id, v) VALUES (?, ?), (?, ?)').run(1, 'a', 2, 'b');
    worker = new SqliteReadWorker(file);
  });

  afterEach(async () => {
    await worker.close();
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers a SELECT with its rows, parameters bound, reading what was committed', async () => {
    await expect(worker.all('SELECT id, v FROM t WHERE id >= ? ORDER BY id', [1])).resolves.toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
    ]);
    db.prepare('INSERT INTO t (id, v) VALUES (?, ?)').run(3, 'c');
    await expect(worker.all('SELECT count(*) AS n FROM t', [])).resolves.toEqual([{ n: 3 }]);
  });

  it('does not see a transaction the writer has not committed', async () => {
    db.exec('BEGIN');
    db.prepare('INSERT INTO t (id, v) VALUES (?, ?)').run(9, 'uncommitted');
    await expect(worker.all('SELECT count(*) AS n FROM t', [])).resolves.toEqual([{ n: 2 }]);
    db.exec('ROLLBACK');
  });

  it('refuses a statement that writes, and the table is unchanged', async () => {
    await expect(worker.all("UPDATE t SET v = 'x'", [])).rejects.toThrow(/not a read|readonly/);
    expect(db.prepare('SELECT v FROM t ORDER BY id').pluck().all()).toEqual(['a', 'b']);
  });

  it('fails a statement with the driver error and keeps serving the next ones', async () => {
    await expect(worker.all('SELECT nope FROM t', [])).rejects.toThrow(/no such column/);
    await expect(worker.all('SELECT v FROM t WHERE id = ?', [2])).resolves.toEqual([{ v: 'b' }]);
  });

  it('refuses statements once closed', async () => {
    await worker.all('SELECT 1 AS one', []);
    await worker.close();
    await expect(worker.all('SELECT 1 AS one', [])).rejects.toThrow(/closed/);
  });
});

describe('SqliteReadWorker pool', () => {
  let dir: string;
  let file: string;
  let db: Database.Database;
  let pool: SqliteReadWorker;
  const workersOf = (p: SqliteReadWorker) => (p as unknown as { workers: Array<Worker | undefined> }).workers;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'read-pool-'));
    file = path.join(dir, 'host.sqlite');
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    db.prepare('INSERT INTO t (id, v) VALUES (?, ?), (?, ?)').run(1, 'a', 2, 'b');
    pool = new SqliteReadWorker(file, 2);
  });

  afterEach(async () => {
    await pool.close();
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('defaults to two workers, one on a single core', () => {
    expect(defaultReadWorkers(1)).toBe(1);
    expect(defaultReadWorkers(2)).toBe(2);
    expect(defaultReadWorkers(64)).toBe(2);
  });

  it('refuses a size that is not a positive integer, naming it', () => {
    for (const bad of [0, -1, 1.5, NaN]) {
      expect(() => new SqliteReadWorker(file, bad)).toThrow(/size must be a positive integer/);
    }
  });

  it('sends a statement to the least busy worker: two in flight run on two workers, each its own connection', async () => {
    expect(pool.size).toBe(2);
    expect(pool.running).toBe(0);
    const first = pool.all('SELECT v FROM t WHERE id = ?', [1]);
    expect(pool.running).toBe(1);
    const second = pool.all('SELECT v FROM t WHERE id = ?', [2]);
    expect(pool.running).toBe(2);
    const [a, b] = workersOf(pool);
    expect(a).toBeDefined();
    expect(b).toBeDefined();
    expect(a).not.toBe(b);
    await expect(Promise.all([first, second])).resolves.toEqual([[{ v: 'a' }], [{ v: 'b' }]]);
    // Idle again: the first worker takes the next statement; none is started.
    await expect(pool.all('SELECT count(*) AS n FROM t', [])).resolves.toEqual([{ n: 2 }]);
    expect(pool.running).toBe(2);
  });

  it('a worker that dies fails only its own statements; the other answers, and the dead one is started again', async () => {
    const doomed = pool.all('SELECT v FROM t WHERE id = ?', [1]);
    const survivor = pool.all('SELECT v FROM t WHERE id = ?', [2]);
    const [first, second] = workersOf(pool);
    await first!.terminate();
    await expect(doomed).rejects.toThrow(/exited/);
    await expect(survivor).resolves.toEqual([{ v: 'b' }]);
    expect(workersOf(pool)[0]).toBeUndefined();
    expect(workersOf(pool)[1]).toBe(second);

    await expect(pool.all('SELECT v FROM t WHERE id = ?', [1])).resolves.toEqual([{ v: 'a' }]);
    expect(pool.running).toBe(2);
    expect(workersOf(pool)[0]).not.toBe(first);
  });

  it('fails a statement whose parameters cannot be sent, holding nothing for it', async () => {
    await expect(pool.all('SELECT ? AS x', [() => 1])).rejects.toThrow();
    expect((pool as unknown as { pending: Map<number, unknown> }).pending.size).toBe(0);
    await expect(pool.all('SELECT 1 AS one', [])).resolves.toEqual([{ one: 1 }]);
  });

  it('closes every worker and refuses statements after', async () => {
    await Promise.all([pool.all('SELECT 1 AS one', []), pool.all('SELECT 2 AS two', [])]);
    expect(pool.running).toBe(2);
    await pool.close();
    expect(pool.running).toBe(0);
    await expect(pool.all('SELECT 1 AS one', [])).rejects.toThrow(/closed/);
  });
});
