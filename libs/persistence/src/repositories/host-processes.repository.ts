import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource, QueryResult } from 'typeorm';
import { SESSION_PREFIX } from '../db-sessions';
import type { HostProcessEntity, HostProcessState } from '../entities';

/** How long the terminate waits for each session to be gone (its locks released) before it goes on. */
const TERMINATE_WAIT_MS = 5000;

/** What a process advertises about itself when it registers. */
export interface NewHostProcess {
  id: string;
  instance: string;
  http_address: string;
  grpc_address: string;
}

type Row = Record<keyof HostProcessEntity, string | number>;

/**
 * The process registry's table (docs/scale-out.md#process-registry). Every time comes from the
 * database's clock, never a process's: heartbeats and the lease compared against them are read
 * on one clock however skewed the machines are. A handful of rows and one statement per call:
 * this is the admin path (TypeORM's connection), not the run path's writer.
 */
@Injectable()
export class HostProcessesRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  private get pg(): boolean {
    return this.db.options.type === 'postgres';
  }

  /** The database's clock in epoch milliseconds, as an SQL expression of the dialect. */
  private get nowSql(): string {
    return this.pg
      ? `(extract(epoch from clock_timestamp()) * 1000)::bigint`
      : `CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`;
  }

  private p(n: number): string {
    return this.pg ? `$${n}` : '?';
  }

  /** A write, with its count of affected rows (both drivers report it in the structured result). */
  private async exec(sql: string, params: unknown[]): Promise<QueryResult> {
    const runner = this.db.createQueryRunner();
    try {
      return await runner.query(sql, params, true);
    } finally {
      await runner.release();
    }
  }

  /** The database's clock now (epoch ms). */
  async now(): Promise<number> {
    const rows = await this.db.query<{ now: string | number }[]>(`SELECT ${this.nowSql} AS "now"`);
    return Number(rows[0].now);
  }

  /** Inserts this process's row, `running`, started and heartbeated now. */
  async register(p: NewHostProcess): Promise<HostProcessEntity> {
    await this.exec(
      `INSERT INTO "host_processes" ("id", "instance", "http_address", "grpc_address", "state", "started_at", "heartbeat_at")
       SELECT ${this.p(1)}, ${this.p(2)}, ${this.p(3)}, ${this.p(4)}, 'running', "t"."now", "t"."now"
         FROM (SELECT ${this.nowSql} AS "now") AS "t"`,
      [p.id, p.instance, p.http_address, p.grpc_address],
    );
    const row = await this.get(p.id);
    if (!row) {
      throw new Error(`host process ${p.id} vanished right after it was registered`);
    }
    return row;
  }

  /**
   * One heartbeat: one statement, whatever the process holds. false when the row is gone: another
   * process swept this one as dead (its lease ran out) and it must not act as its old self.
   */
  async heartbeat(id: string): Promise<boolean> {
    const r = await this.exec(`UPDATE "host_processes" SET "heartbeat_at" = ${this.nowSql} WHERE "id" = ${this.p(1)}`, [
      id,
    ]);
    return (r.affected ?? 0) > 0;
  }

  /** Marks the process running or draining; false when its row is gone. */
  async setState(id: string, state: HostProcessState): Promise<boolean> {
    const r = await this.exec(`UPDATE "host_processes" SET "state" = ${this.p(1)} WHERE "id" = ${this.p(2)}`, [
      state,
      id,
    ]);
    return (r.affected ?? 0) > 0;
  }

  /** The addresses the process listens on once it is bound; false when its row is gone. */
  async setAddresses(id: string, httpAddress: string, grpcAddress: string): Promise<boolean> {
    const r = await this.exec(
      `UPDATE "host_processes" SET "http_address" = ${this.p(1)}, "grpc_address" = ${this.p(2)} WHERE "id" = ${this.p(3)}`,
      [httpAddress, grpcAddress, id],
    );
    return (r.affected ?? 0) > 0;
  }

  /** A clean stop: the row goes at once (nobody has to wait for the lease). */
  async remove(id: string): Promise<void> {
    await this.exec(`DELETE FROM "host_processes" WHERE "id" = ${this.p(1)}`, [id]);
  }

  /**
   * Every other process's row goes (SQLite only: one process per database file, so at boot every
   * other row is a previous process of this file, dead: docs/durability.md#crash-recovery).
   * Returns how many went.
   */
  async removeOthers(id: string): Promise<number> {
    if (this.pg) {
      throw new Error('removeOthers: only on SQLite (several processes share a PostgreSQL database)');
    }
    const r = await this.exec(`DELETE FROM "host_processes" WHERE "id" <> ${this.p(1)}`, [id]);
    return r.affected ?? 0;
  }

  /** How many processes are registered (live or not yet swept). */
  async count(): Promise<number> {
    const rows = await this.db.query<{ n: string | number }[]>(`SELECT COUNT(*) AS "n" FROM "host_processes"`);
    return Number(rows[0].n);
  }

  async get(id: string): Promise<HostProcessEntity | null> {
    const rows = await this.db.query<Row[]>(`SELECT * FROM "host_processes" WHERE "id" = ${this.p(1)}`, [id]);
    return rows.length > 0 ? toEntity(rows[0]) : null;
  }

  /** Processes whose heartbeat is within the lease (oldest start first). */
  async live(leaseMs: number): Promise<HostProcessEntity[]> {
    const rows = await this.db.query<Row[]>(
      `SELECT * FROM "host_processes" WHERE "heartbeat_at" >= ${this.nowSql} - ${this.p(1)} ORDER BY "started_at", "id"`,
      [leaseMs],
    );
    return rows.map(toEntity);
  }

  /** The sweeper's query: processes whose heartbeat is older than the lease (oldest heartbeat first). */
  async expired(leaseMs: number): Promise<HostProcessEntity[]> {
    const rows = await this.db.query<Row[]>(
      `SELECT * FROM "host_processes" WHERE "heartbeat_at" < ${this.nowSql} - ${this.p(1)} ORDER BY "heartbeat_at", "id"`,
      [leaseMs],
    );
    return rows.map(toEntity);
  }

  /**
   * Declares an expired process dead by deleting its row, if it is still expired: of several
   * sweepers exactly one wins (true), and a process that heartbeated in between is left alone.
   */
  async claimDead(id: string, leaseMs: number): Promise<boolean> {
    const r = await this.exec(
      `DELETE FROM "host_processes" WHERE "id" = ${this.p(1)} AND "heartbeat_at" < ${this.nowSql} - ${this.p(2)}`,
      [id, leaseMs],
    );
    return (r.affected ?? 0) > 0;
  }

  /**
   * PostgreSQL: ends every session of this database in a transaction (or running a statement)
   * whose `application_name` names process `id`
   * (`runner-host <id> <role>`: db-sessions.ts), waiting for them to be gone, so the locks of a
   * transaction it was paused in are released (docs/scale-out.md#sessions-of-a-paused-process).
   * Only for a process this caller just declared dead (`claimDead` true): its id is fresh per
   * registration, so no live process's session carries it. Resolves with the sessions signalled and
   * those still there after the wait; throws when the role may not signal them (the server's
   * idle-in-transaction timeout is then the net). SQLite has no other sessions: nothing.
   */
  async terminateSessions(id: string): Promise<{ ended: number; left: number }> {
    if (!this.pg) {
      return { ended: 0, left: 0 };
    }
    // The sessions are picked first (MATERIALIZED): the terminate runs on exactly those. An idle
    // session (no transaction) holds no lock and is left alone: a process declared dead while it
    // was only slow (a long boot, a stalled event loop) would otherwise meet a terminated pooled
    // connection at its next queries, one failed query each. All are
    // signalled at once; only then is each waited for (a wait polls every 100 ms in the server:
    // one after the other, they would delay the takeover by 100 ms a session).
    const sessions = `WITH "s" AS MATERIALIZED (
         SELECT "pid" FROM pg_stat_activity
          WHERE "datname" = current_database() AND "pid" <> pg_backend_pid()
            AND split_part("application_name", ' ', 1) = $1 AND split_part("application_name", ' ', 2) = $2
            AND "state" <> 'idle')`;
    const signalled = await this.db.query<{ signalled: boolean }[]>(
      `${sessions} SELECT pg_terminate_backend("pid") AS "signalled" FROM "s"`,
      [SESSION_PREFIX, id],
    );
    const left = await this.db.query<{ gone: boolean }[]>(
      `${sessions} SELECT pg_terminate_backend("pid", $3) AS "gone" FROM "s"`,
      [SESSION_PREFIX, id, TERMINATE_WAIT_MS],
    );
    return {
      ended: signalled.filter((r) => r.signalled).length,
      left: left.filter((r) => !r.gone).length,
    };
  }
}

function toEntity(r: Row): HostProcessEntity {
  return {
    id: String(r.id),
    instance: String(r.instance),
    http_address: String(r.http_address),
    grpc_address: String(r.grpc_address),
    state: String(r.state) as HostProcessState,
    started_at: Number(r.started_at),
    heartbeat_at: Number(r.heartbeat_at),
  };
}
