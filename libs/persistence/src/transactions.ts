import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource, EntityManager } from 'typeorm';

/**
 * Runs admin work (TypeORM) in a database transaction. On PostgreSQL each transaction has a pooled
 * connection of its own. On SQLite every caller shares one connection: each transaction has its
 * own query runner, and the connection's gate (sqlite-query-runner.ts) lets one transaction be
 * open at a time — others, and other callers' statements, wait for it (bounded by
 * SQLITE_BUSY_WAIT_MS, then 503 `database.busy`; docs/durability.md#a-busy-writer-lock), so no
 * other request's write can run inside it or be rolled back with it. `work` must use the manager
 * it is given: a write through another repository waits for this very transaction, and a read there
 * (on the read-only connection) sees the committed rows, not this transaction's. The run
 * path does not come here: its writes go through the one writer (hot/), which waits while such a
 * transaction is open on the shared SQLite connection.
 */
@Injectable()
export class Transactions {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  run<T>(work: (m: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }
}
