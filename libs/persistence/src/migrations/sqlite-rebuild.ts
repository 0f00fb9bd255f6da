import type { QueryRunner } from 'typeorm';

/**
 * Rebuilds a SQLite table with an edited `CREATE TABLE` (SQLite cannot alter a column): creates
 * the edited table under a temporary name, copies every row with its rowid, drops the old table
 * (its indexes and triggers go with it), renames the new one and creates the old table's indexes
 * and triggers again from their stored SQL (names, partial and expression indexes, the
 * transcript's FTS delete trigger: unchanged). `edit` must change the statement; a statement it
 * leaves as it was is an error (the schema is not the one this migration was written for).
 * Used by migrations only, inside their transaction.
 */
export async function rebuildSqliteTable(q: QueryRunner, table: string, edit: (sql: string) => string): Promise<void> {
  const rows = (await q.query(`SELECT "sql" FROM "sqlite_schema" WHERE "type" = 'table' AND "name" = ?`, [table])) as {
    sql: string;
  }[];
  if (rows.length !== 1) {
    throw new Error(`rebuildSqliteTable: no table "${table}"`);
  }
  const create = rows[0].sql;
  const edited = edit(create);
  if (edited === create) {
    throw new Error(`rebuildSqliteTable: the edit leaves "${table}" as it is`);
  }
  const head = `CREATE TABLE "${table}"`;
  if (!edited.startsWith(head)) {
    throw new Error(`rebuildSqliteTable: "${table}" is not created as ${head}`);
  }
  const extras = (await q.query(
    `SELECT "sql" FROM "sqlite_schema" WHERE "tbl_name" = ? AND "type" IN ('index', 'trigger') AND "sql" IS NOT NULL
     ORDER BY "type", "name"`,
    [table],
  )) as { sql: string }[];
  const columns = ((await q.query(`PRAGMA table_info("${table}")`)) as { name: string }[])
    .map((c) => `"${c.name}"`)
    .join(', ');
  const temp = `${table}__rebuild`;
  await q.query(`CREATE TABLE "${temp}"${edited.slice(head.length)}`);
  await q.query(`INSERT INTO "${temp}" (${columns}) SELECT ${columns} FROM "${table}" ORDER BY "rowid"`);
  await q.query(`DROP TABLE "${table}"`);
  await q.query(`ALTER TABLE "${temp}" RENAME TO "${table}"`);
  for (const { sql } of extras) {
    await q.query(sql);
  }
}
