import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource, QueryResult } from 'typeorm';

/** A live Connect stream of a plugin, as runner presence records it. */
export interface PresenceSession {
  plugin_id: string;
  session_id: string;
  connected_at: number;
}

/** A live process holding a runner (a row whose process is alive: within its lease, not draining). */
export interface RunnerHolder {
  runner_id: string;
  process_id: string;
  plugin_id: string;
  session_id: string;
  connected_at: number;
}

/**
 * Runner presence (docs/scale-out.md#runner-presence): which live host process holds a Connect
 * stream of which runner. One row per (runner, process), the session that serves it there
 * (mirroring that process's RunnerConnections); every read joins on `host_processes`, so a row of
 * a dead or stopped process counts for nothing even before it is deleted. The admin path
 * (TypeORM's connection), a statement per attach / detach: never the run path's writer.
 */
@Injectable()
export class RunnerPresenceRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  private get pg(): boolean {
    return this.db.options.type === 'postgres';
  }

  private p(n: number): string {
    return this.pg ? `$${n}` : '?';
  }

  private get nowSql(): string {
    return this.pg
      ? `(extract(epoch from clock_timestamp()) * 1000)::bigint`
      : `CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`;
  }

  private async exec(sql: string, params: unknown[]): Promise<number> {
    const runner = this.db.createQueryRunner();
    try {
      const r: QueryResult = await runner.query(sql, params, true);
      return r.affected ?? 0;
    } finally {
      await runner.release();
    }
  }

  /** The session now serves these runners in this process (replacing what served them there before). */
  async attach(processId: string, session: PresenceSession, runnerIds: readonly string[]): Promise<void> {
    for (const runnerId of runnerIds) {
      await this.exec(
        `INSERT INTO "runner_presence" ("runner_id", "process_id", "plugin_id", "session_id", "connected_at")
         VALUES (${this.p(1)}, ${this.p(2)}, ${this.p(3)}, ${this.p(4)}, ${this.p(5)})
         ON CONFLICT ("runner_id", "process_id") DO UPDATE SET "plugin_id" = excluded."plugin_id",
           "session_id" = excluded."session_id", "connected_at" = excluded."connected_at"`,
        [runnerId, processId, session.plugin_id, session.session_id, session.connected_at],
      );
    }
  }

  /** The session ended: its rows go (a row a newer session of the process took over stays). */
  async detach(processId: string, sessionId: string): Promise<number> {
    return this.exec(
      `DELETE FROM "runner_presence" WHERE "process_id" = ${this.p(1)} AND "session_id" = ${this.p(2)}`,
      [processId, sessionId],
    );
  }

  /** Every row of one process (its clean stop, or its death declared by a sweep). */
  async removeProcess(processId: string): Promise<number> {
    return this.exec(`DELETE FROM "runner_presence" WHERE "process_id" = ${this.p(1)}`, [processId]);
  }

  /** Rows of processes that have no registry row any more (housekeeping: reads ignore them anyway). */
  async removeOrphans(): Promise<number> {
    return this.exec(`DELETE FROM "runner_presence" WHERE "process_id" NOT IN (SELECT "id" FROM "host_processes")`, []);
  }

  /**
   * The live processes holding the runner, other than `exceptProcessId`: their registry row
   * exists, is `running` (a draining process takes no new work) and heartbeated within the lease;
   * longest-connected first.
   */
  async holders(runnerId: string, exceptProcessId: string, leaseMs: number): Promise<RunnerHolder[]> {
    const rows = await this.db.query<Array<Record<keyof RunnerHolder, string | number>>>(
      `SELECT p."runner_id", p."process_id", p."plugin_id", p."session_id", p."connected_at"
         FROM "runner_presence" p JOIN "host_processes" h ON h."id" = p."process_id"
        WHERE p."runner_id" = ${this.p(1)} AND p."process_id" <> ${this.p(2)} AND h."state" = 'running'
          AND h."heartbeat_at" >= ${this.nowSql} - ${this.p(3)}
        ORDER BY p."connected_at", p."process_id"`,
      [runnerId, exceptProcessId, leaseMs],
    );
    return rows.map((r) => ({
      runner_id: String(r.runner_id),
      process_id: String(r.process_id),
      plugin_id: String(r.plugin_id),
      session_id: String(r.session_id),
      connected_at: Number(r.connected_at),
    }));
  }

  /** Every row of one process (tests, admin). */
  async ofProcess(processId: string): Promise<Array<{ runner_id: string; session_id: string; plugin_id: string }>> {
    const rows = await this.db.query<Array<Record<string, string>>>(
      `SELECT "runner_id", "session_id", "plugin_id" FROM "runner_presence" WHERE "process_id" = ${this.p(1)} ORDER BY "runner_id"`,
      [processId],
    );
    return rows.map((r) => ({
      runner_id: String(r.runner_id),
      session_id: String(r.session_id),
      plugin_id: String(r.plugin_id),
    }));
  }
}
