import type { MigrationInterface, QueryRunner } from 'typeorm';
import { rebuildSqliteTable } from './sqlite-rebuild';

const AUTOINCREMENT = '"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT';
const ROWID = '"id" INTEGER NOT NULL PRIMARY KEY';

/**
 * SQLite: `audit_log` keeps its ids without `AUTOINCREMENT`, as the run path's five append tables
 * do since RowidIds1767700000000 (docs/durability.md, "Row ids"). With it every commit that
 * inserted an audit row also rewrote `sqlite_sequence`: at one host-API call at a time, every read
 * call's audit row is a commit of its own (docs/durability.md#audit-rows-of-read-calls), and that
 * page was one of its three WAL frames (docs/benchmarks.md, "`StateGet` at c1: the audit row's
 * `sqlite_sequence` frame"). Without it SQLite gives `max(id) + 1`, so an id could come again only
 * if the row holding the largest id were deleted, and no path deletes an audit row (retention
 * never touches them: docs/durability.md#retention); a rolled-back insert's id was never seen by
 * anyone. The ids stay the run's audit cursor (`GET /v1/admin/runs/{run_id}/audit`, `idx_audit_run`
 * unchanged). The rebuild copies every row with its id and recreates the index from its stored SQL.
 * PostgreSQL: nothing (a SERIAL sequence costs no page of its own). `down` puts `AUTOINCREMENT`
 * back; SQLite sets `sqlite_sequence` to the largest id copied.
 */
export class AuditRowidIds1767730000000 implements MigrationInterface {
  name = 'AuditRowidIds1767730000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      return;
    }
    await rebuildSqliteTable(q, 'audit_log', (sql) => sql.replace(AUTOINCREMENT, ROWID));
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === 'postgres') {
      return;
    }
    await rebuildSqliteTable(q, 'audit_log', (sql) => sql.replace(ROWID, AUTOINCREMENT));
  }
}
