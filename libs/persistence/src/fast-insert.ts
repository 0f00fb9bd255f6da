import type { DataSource } from 'typeorm';

/**
 * A plain parameterised INSERT for the hottest writes (run results, audit rows). TypeORM's SQLite
 * query builder writes numbers into the SQL text, so each insert was a new statement: prepared
 * again every time and pushing the hot SELECTs out of the statement cache. Here the SQL text is
 * fixed per table and every value is bound. Values must already be column values (JSON columns
 * as strings; no booleans — better-sqlite3 cannot bind them).
 */
export class FastInsert {
  private readonly sql: string;

  constructor(
    private readonly db: DataSource,
    table: string,
    private readonly columns: readonly string[],
  ) {
    const pg = db.options.type === 'postgres';
    const marks = columns.map((_c, i) => (pg ? `$${i + 1}` : '?')).join(', ');
    this.sql = `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(', ')}) VALUES (${marks})`;
  }

  async run(row: Record<string, string | number | null>): Promise<void> {
    await this.db.query(
      this.sql,
      this.columns.map((c) => row[c] ?? null),
    );
  }
}
