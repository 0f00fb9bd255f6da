import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { DomainError } from '@libs/protocol';
import { batchableInsert, lockKeys, RESULT_COLUMNS, SQL, stmt, type HotStatement } from './hot-sql';
import { FencedError, type RunLease } from './run-fence';
import { finishUnit, resultUnit, type NewResult } from './run-units';
import { SqliteHot, sqliteText } from './sqlite-driver';
import { exec, one, rows, type Unit } from './unit';
import { DatabaseBusyError, WriteQueue, WriterBusy } from './write-queue';

describe('sqliteText', () => {
  it('turns a lone bound LIMIT or OFFSET into an expression', () => {
    expect(sqliteText('SELECT 1 FROM t WHERE a = ? ORDER BY a LIMIT ?')).toBe(
      'SELECT 1 FROM t WHERE a = ? ORDER BY a LIMIT +?',
    );
    expect(sqliteText('SELECT 1 FROM t LIMIT ? OFFSET ?')).toBe('SELECT 1 FROM t LIMIT +? OFFSET +?');
    expect(sqliteText('SELECT 1 FROM t\n  LIMIT  ?')).toBe('SELECT 1 FROM t\n  LIMIT +?');
  });

  it('leaves literal limits, expressions and other parameters alone', () => {
    for (const sql of [
      'SELECT 1 FROM t LIMIT 5',
      'SELECT 1 FROM t LIMIT ? + 1',
      'SELECT 1 FROM t LIMIT +?',
      'SELECT 1 FROM t WHERE a = ?',
      'SELECT "LIMITS" FROM t',
    ]) {
      expect(sqliteText(sql)).toBe(sql);
    }
  });
});

describe('SqliteHot statements run as their chain (HotStatement.sqliteChain)', () => {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE a (k TEXT PRIMARY KEY); CREATE TABLE b (id INTEGER PRIMARY KEY, k TEXT, v TEXT)');
  const hot = new SqliteHot(db);
  const chained: HotStatement = {
    ...stmt('test_chain', '-- sqliteChain', 'not run here'),
    sqliteChain: [
      { stmt: stmt('test_chain_a', 'INSERT INTO "a" ("k") VALUES (?) ON CONFLICT DO NOTHING'), params: 1 },
      { stmt: stmt('test_chain_b', 'INSERT INTO "b" ("k", "v") VALUES (?, ?) RETURNING "id"'), params: 2 },
    ],
  };
  const claim = (k: string, v: string) => hot.runGroup([() => one<{ id: number }>(chained, [k, k, v])])[0];

  afterAll(() => db.close());

  it("runs each step with its own parameters; the answer is the last step's", () => {
    expect(claim('x', 'first')).toEqual({ id: 1 });
    expect(claim('y', 'second')).toEqual({ id: 2 });
    expect(db.prepare('SELECT "k", "v" FROM "b" ORDER BY "id"').all()).toEqual([
      { k: 'x', v: 'first' },
      { k: 'y', v: 'second' },
    ]);
  });

  it('stops at a step that inserted nothing: no row answered, the later steps not run', () => {
    expect(claim('x', 'again')).toBeUndefined();
    expect(hot.runGroup([() => exec(chained, ['x', 'x', 'again'])])).toEqual([0]);
    expect(hot.runGroup([() => rows(chained, ['x', 'x', 'again'])])).toEqual([[]]);
    expect(db.prepare('SELECT COUNT(*) AS "n" FROM "b"').get()).toEqual({ n: 2 });
  });
});

describe('SqliteHot statements with a bound LIMIT', () => {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)');
  db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run(1, 'a');
  db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run(2, 'b');
  db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run(3, 'c');
  const hot = new SqliteHot(db);
  const page = stmt('test_page', 'SELECT "k" FROM "t" WHERE "k" > ? ORDER BY "k" DESC LIMIT ? OFFSET ?');
  const keys = (after: number, limit: number, offset: number) =>
    hot.read(rows<{ k: number }>(page, [after, limit, offset])).map((r) => r.k);

  afterAll(() => db.close());

  it('answers the rows a literal LIMIT would, whatever the limit bound at each run', () => {
    expect(keys(0, 2, 0)).toEqual([3, 2]);
    expect(keys(0, 1, 1)).toEqual([2]);
    expect(keys(1, 5, 0)).toEqual([3, 2]);
    expect(keys(0, 0, 0)).toEqual([]);
    expect(keys(0, -1, 0)).toEqual([3, 2, 1]); // a negative LIMIT is no limit, as in SQLite
  });

  it('rejects a limit that is not a number, as a plain LIMIT ? does', () => {
    const bad = () => hot.read(rows(page, [0, 'many', 0]));
    expect(bad).toThrow(/datatype mismatch/);
    expect(() => db.prepare('SELECT "k" FROM "t" LIMIT ?').all('many')).toThrow(/datatype mismatch/);
  });
});

/**
 * A WAL database file with two connections, `host` (the writer under test) and `other` (holds the
 * writer lock or reads what committed), both with a 5 ms busy timeout, built before each test of
 * the calling describe and closed after it.
 */
function twoConnections(prefix: string, schema: string) {
  const db = {} as { dir: string; host: Database.Database; other: Database.Database };
  beforeEach(() => {
    db.dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    const file = path.join(db.dir, 'db.sqlite');
    db.host = new Database(file);
    db.host.pragma('journal_mode = WAL');
    db.host.pragma('busy_timeout = 5');
    db.host.exec(schema);
    db.other = new Database(file);
    db.other.pragma('busy_timeout = 5');
  });
  afterEach(() => {
    if (db.other.inTransaction) {
      db.other.exec('ROLLBACK');
    }
    db.other.close();
    db.host.close();
    fs.rmSync(db.dir, { recursive: true, force: true });
  });
  return db;
}

/**
 * Commits `other`'s transaction (releasing the writer lock it holds) only once the queue has met
 * the lock busy — from a timer, since the queue waits off this thread.
 */
function commitOnceMetBusy(q: WriteQueue, other: Database.Database): Promise<void> {
  return new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (q.busy.retries > 0) {
        clearInterval(poll);
        other.exec('COMMIT');
        resolve();
      }
    }, 1);
  });
}

/**
 * The writer lock held by another connection (as the checkpoint worker's TRUNCATE holds it,
 * docs/durability.md#sqlite): the host's BEGIN IMMEDIATE fails SQLITE_BUSY after its busy timeout.
 * Before, every unit of the group — replayed one by one — failed with "database is locked" (a 500
 * for an accepted event); now the queue runs the whole group again off the event loop.
 */
describe('SqliteHot groups while another connection holds the writer lock', () => {
  let host: Database.Database;
  let other: Database.Database;
  const insert = stmt('test_busy_insert', 'INSERT INTO "t" ("v") VALUES (?)');
  function* put(v: string): Unit<string> {
    yield* exec(insert, [v]);
    return v;
  }
  const values = () => host.prepare('SELECT "v" FROM "t" ORDER BY "v"').pluck().all();

  const db = twoConnections('sqlite-busy-', 'CREATE TABLE t (v TEXT NOT NULL)');
  beforeEach(() => {
    ({ host, other } = db);
  });

  it('runs the whole group once the lock is free: every unit commits, none fails', async () => {
    const q = new WriteQueue(new SqliteHot(host), 256, 0, 256, { firstDelayMs: 1, maxDelayMs: 5, boundMs: 10_000 });
    other.exec('BEGIN IMMEDIATE');
    const done = Promise.all(['a', 'b', 'c'].map((v) => q.submit(() => put(v))));
    await commitOnceMetBusy(q, other);
    await expect(done).resolves.toEqual(['a', 'b', 'c']);
    expect(values()).toEqual(['a', 'b', 'c']);
    expect(q.stats).toMatchObject({ units: 3, commits: 1, replays: 0 });
    expect(q.busy.failed).toBe(0);
  });

  it('fails every unit of the group with a retryable unavailable error after the bound, writing nothing', async () => {
    const q = new WriteQueue(new SqliteHot(host), 256, 0, 256, { firstDelayMs: 1, maxDelayMs: 5, boundMs: 40 });
    other.exec('BEGIN IMMEDIATE');
    const settled = await Promise.allSettled(['a', 'b'].map((v) => q.submit(() => put(v))));
    for (const s of settled) {
      expect(s.status).toBe('rejected');
      const e = (s as PromiseRejectedResult).reason as DomainError;
      expect(e).toBeInstanceOf(DatabaseBusyError);
      expect(e.toProtocol()).toMatchObject({
        code: 'unavailable',
        retryable: true,
        details: { reason: 'database.busy' },
      });
      expect(e.message).toMatch(/stayed locked.*nothing was written, retry/);
    }
    expect(q.stats.replays).toBe(0); // not replayed unit by unit: each would wait for the same lock
    expect(q.busy.failed).toBe(1);
    other.exec('ROLLBACK');
    expect(values()).toEqual([]);
    // The lock is free again: the next write commits.
    await expect(q.submit(() => put('d'))).resolves.toBe('d');
    expect(values()).toEqual(['d']);
  });

  it('still fails only the failing unit of a group on a statement error (not a busy lock)', async () => {
    const q = new WriteQueue(new SqliteHot(host));
    const settled = await Promise.allSettled(['a', null, 'c'].map((v) => q.submit(() => put(v as string))));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/NOT NULL/);
    expect(values()).toEqual(['a', 'c']);
    expect(q.busy.retries).toBe(0);
  });
});

/**
 * Reads outside a group run on the read connection (the host's read-only one,
 * docs/durability.md "Reads on their own connection"): committed rows only, never those of a
 * transaction open on the writer connection; a write there is refused.
 */
describe('SqliteHot reads on a read connection', () => {
  let dir: string;
  let writer: Database.Database;
  let reader: Database.Database;
  const values = stmt('test_read_values', 'SELECT "v" FROM "t" ORDER BY "v"');
  const insert = stmt('test_read_insert', 'INSERT INTO "t" ("v") VALUES (?)');
  const read = (hot: SqliteHot) => hot.read(rows<{ v: string }>(values, [])).map((r) => r.v);

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqlite-read-'));
    const file = path.join(dir, 'db.sqlite');
    writer = new Database(file);
    writer.pragma('journal_mode = WAL');
    writer.exec(`CREATE TABLE t (v TEXT NOT NULL); INSERT INTO t (v) VALUES ('committed')`);
    reader = new Database(file, { readonly: true, fileMustExist: true });
  });

  afterEach(() => {
    reader.close();
    writer.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('sees committed rows only, not a transaction open on the writer connection', () => {
    const hot = new SqliteHot(writer, reader);
    writer.exec(`BEGIN IMMEDIATE; INSERT INTO t (v) VALUES ('open')`);
    expect(read(hot)).toEqual(['committed']);
    expect(read(new SqliteHot(writer))).toEqual(['committed', 'open']); // on the writer connection: the dirty read
    writer.exec('COMMIT');
    expect(read(hot)).toEqual(['committed', 'open']);
    expect(reader.inTransaction).toBe(false);
  });

  it('runs a read on the writer connection while no transaction is open on it, on the read connection otherwise', () => {
    const hot = new SqliteHot(writer, reader);
    const onReader = jest.spyOn(reader, 'prepare');
    expect(read(hot)).toEqual(['committed']);
    expect(onReader).not.toHaveBeenCalled();
    writer.exec(`BEGIN IMMEDIATE; INSERT INTO t (v) VALUES ('open')`);
    expect(read(hot)).toEqual(['committed']);
    expect(onReader).toHaveBeenCalledTimes(1);
    writer.exec('ROLLBACK');
    expect(read(hot)).toEqual(['committed']);
    expect(onReader).toHaveBeenCalledTimes(1);
  });

  it('refuses a write in a read, and writes nothing', () => {
    const hot = new SqliteHot(writer, reader);
    expect(() => hot.read(exec(insert, ['x']))).toThrow(/readonly database/);
    expect(read(hot)).toEqual(['committed']);
  });
});

describe('SqliteHot groups: statements a group need not step (docs/benchmarks.md, "Fewer SQLite statements per run")', () => {
  const db = new Database(':memory:');
  db.exec(`CREATE TABLE "host_processes" ("id" TEXT PRIMARY KEY);
    CREATE TABLE "runs" ("run_id" TEXT PRIMARY KEY, "status" TEXT, "status_reason" TEXT, "error_code" TEXT,
      "retryable" INTEGER, "usage" TEXT, "finished_at" INTEGER, "attempt" INTEGER, "owner_process_id" TEXT,
      "last_write_at" INTEGER);
    CREATE TABLE "run_results" ("id" INTEGER PRIMARY KEY, ${RESULT_COLUMNS.map((c) => `"${c}"`).join(', ')});
    CREATE TABLE "t" ("v" TEXT)`);
  db.prepare('INSERT INTO "host_processes" ("id") VALUES (?)').run('p1');
  const hot = new SqliteHot(db);
  const stepped = (): string[] => step.mock.calls.map(([op]) => op.stmt.name);
  const step = jest.spyOn(hot, 'step');
  const lease: RunLease = { run_id: 'r1', attempt: 1, owner_process_id: 'p1' };
  const result = (run: string, sequence: number, type = 'delta'): NewResult => ({
    run_id: run,
    sequence,
    type,
    data: {},
    usage: null,
    source: 'runner',
    timestamp: 1,
    created_at: 1,
  });
  const end = { status: 'completed', status_reason: null, error_code: null, retryable: null, finished_at: 2 };
  const startRun = (run: string, status = 'running') =>
    db
      .prepare('INSERT INTO "runs" ("run_id", "status", "attempt", "owner_process_id") VALUES (?, ?, 1, ?)')
      .run(run, status, 'p1');
  const results = (run: string) =>
    (
      db.prepare('SELECT "sequence" FROM "run_results" WHERE "run_id" = ? ORDER BY "sequence"').all(run) as {
        sequence: number;
      }[]
    ).map((r) => r.sequence);

  beforeEach(() => step.mockClear());
  afterAll(() => db.close());

  it('answers a transaction advisory lock without stepping it: SQLite has one writer', () => {
    function* locked(): Unit<unknown> {
      yield* one(SQL.lockConversation, ['conversation:x']);
      yield* one(lockKeys(2), ['conversation:x', 'transcript:x']);
      return yield* exec(stmt('test_put', 'INSERT INTO "t" ("v") VALUES (?)'), ['locked']);
    }
    expect(hot.runGroup([locked])).toEqual([1]);
    expect(stepped()).toEqual(['hot_test_put']);
  });

  it("runs a run's end with its fence first when the group's other units only fence its lease: no FENCE_RUN", () => {
    startRun('r1');
    const out = hot.runGroup([
      () => resultUnit(result('r1', 1), null, [], lease),
      () => resultUnit(result('r1', 2), null, [], lease),
      () => finishUnit(result('r1', 3, 'run.completed'), end, null, null, [], lease),
    ]);
    expect(out).toEqual([undefined, undefined, true]);
    expect(stepped()).toEqual(['hot_finish_run_fenced']);
    expect(results('r1')).toEqual([1, 2, 3]);
    expect(db.prepare('SELECT "status" FROM "runs" WHERE "run_id" = ?').get('r1')).toEqual({ status: 'completed' });
  });

  it('an end that changed nothing (the run ended already) leaves the results their own fence, as before', () => {
    startRun('r2', 'failed');
    const l2 = { ...lease, run_id: 'r2' };
    const out = hot.runGroup([
      () => resultUnit(result('r2', 1), null, [], l2),
      () => finishUnit(result('r2', 2, 'run.completed'), end, null, null, [], l2),
    ]);
    expect(out).toEqual([undefined, false]);
    expect(stepped()).toEqual(['hot_finish_run_fenced', 'hot_fence_run']);
    expect(results('r2')).toEqual([1]);
  });

  it('a lease taken over fails the group (FencedError), writing nothing', () => {
    startRun('r3');
    const stale = { ...lease, run_id: 'r3', attempt: 0 };
    expect(() =>
      hot.runGroup([
        () => resultUnit(result('r3', 1), null, [], stale),
        () => finishUnit(result('r3', 2, 'run.completed'), end, null, null, [], stale),
      ]),
    ).toThrow(FencedError);
    expect(results('r3')).toEqual([]);
    expect(db.prepare('SELECT "status" FROM "runs" WHERE "run_id" = ?').get('r3')).toEqual({ status: 'running' });
  });

  it("does not hoist an end past another run's units: each runs its own fence, in order", () => {
    startRun('r4');
    startRun('r5');
    const l4 = { ...lease, run_id: 'r4' };
    const l5 = { ...lease, run_id: 'r5' };
    hot.runGroup([
      () => resultUnit(result('r4', 1), null, [], l4),
      () => resultUnit(result('r5', 1), null, [], l5),
      () => finishUnit(result('r4', 2, 'run.completed'), end, null, null, [], l4),
    ]);
    expect(stepped()).toEqual(['hot_fence_run', 'hot_fence_run', 'hot_finish_run_fenced']);
    expect(results('r4')).toEqual([1, 2]);
  });
});

/**
 * BEGIN IMMEDIATE before a group's first statement, not before its units: a group whose only
 * statement is one held insert (a read call's audit row at one call at a time) runs it in
 * autocommit (docs/benchmarks.md, "StateGet at c1: the audit row in autocommit").
 */
describe('SqliteHot groups: the transaction begins at the first statement', () => {
  let host: Database.Database;
  let other: Database.Database;
  let hot: SqliteHot;
  let execs: jest.SpyInstance;
  const row = batchableInsert('test_row', 'a', ['v']);
  const rowB = batchableInsert('test_row_b', 'b', ['v']);
  const read = stmt('test_read', 'SELECT COUNT(*) AS "n" FROM "a"');
  function* held(v: string): Unit<string> {
    yield* exec(row, [v]);
    return v;
  }
  const sql = () => execs.mock.calls.map(([s]) => s).filter((s) => /BEGIN|COMMIT|ROLLBACK/.test(s));
  const rowsOf = (t: string) => other.prepare(`SELECT "v" FROM "${t}" ORDER BY "v"`).pluck().all();

  const db = twoConnections('sqlite-begin-', 'CREATE TABLE a (v TEXT NOT NULL); CREATE TABLE b (v TEXT NOT NULL)');
  beforeEach(() => {
    ({ host, other } = db);
    execs = jest.spyOn(host, 'exec');
    hot = new SqliteHot(host);
  });

  it('runs a group whose only statement is one held insert in autocommit: committed, no BEGIN or COMMIT', () => {
    expect(hot.runGroup([() => held('x')])).toEqual(['x']);
    expect(sql()).toEqual([]);
    expect(host.inTransaction).toBe(false);
    expect(rowsOf('a')).toEqual(['x']); // committed: another connection reads it
  });

  it('rows of several units into one statement: still one autocommit statement, all or nothing', () => {
    expect(hot.runGroup([() => held('x'), () => held('y')])).toEqual(['x', 'y']);
    expect(sql()).toEqual([]);
    expect(rowsOf('a')).toEqual(['x', 'y']);
    function* bad(): Unit<null> {
      yield* exec(row, [null]);
      return null;
    }
    expect(() => hot.runGroup([() => held('z'), bad])).toThrow(/NOT NULL/);
    expect(rowsOf('a')).toEqual(['x', 'y']); // the statement's other row is not written either
  });

  it('begins once, at the first statement, when the group has more than one statement', () => {
    function* two(): Unit<number> {
      yield* exec(row, ['x']);
      yield* exec(rowB, ['y']);
      return 2;
    }
    function* readAfter(): Unit<number> {
      yield* exec(row, ['z']);
      return ((yield* one<{ n: number }>(read, [])) as { n: number }).n;
    }
    expect(hot.runGroup([two])).toEqual([2]);
    expect(sql()).toEqual(['BEGIN IMMEDIATE', 'COMMIT']);
    execs.mockClear();
    expect(hot.runGroup([readAfter])).toEqual([2]); // the held row is written before the read, in the transaction
    expect(sql()).toEqual(['BEGIN IMMEDIATE', 'COMMIT']);
    expect(rowsOf('a')).toEqual(['x', 'z']);
    expect(rowsOf('b')).toEqual(['y']);
  });

  it('a group with no statement (a barrier) touches the database not at all', () => {
    function* nothing(): Unit<void> {}
    expect(hot.runGroup([nothing])).toEqual([undefined]);
    expect(sql()).toEqual([]);
  });

  it('an autocommit insert meeting the writer lock busy is WriterBusy, nothing written; the queue runs it again once free', async () => {
    other.exec('BEGIN IMMEDIATE');
    expect(() => hot.runGroup([() => held('x')])).toThrow(WriterBusy);
    expect(host.inTransaction).toBe(false);
    const q = new WriteQueue(hot, 256, 0, 256, { firstDelayMs: 1, maxDelayMs: 5, boundMs: 10_000 });
    const done = q.submit(() => held('y'));
    await commitOnceMetBusy(q, other);
    await expect(done).resolves.toBe('y');
    expect(rowsOf('a')).toEqual(['y']);
  });
});
