import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { SqliteReadWorker } from './sqlite-read-worker';

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
