import Database from 'better-sqlite3';
import { stmt } from './hot-sql';
import { SqliteHot, sqliteText } from './sqlite-driver';
import { rows } from './unit';

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
