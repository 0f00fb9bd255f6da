import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource, EntityManager } from 'typeorm';

/**
 * Runs admin work (TypeORM) in a database transaction. TypeORM drives better-sqlite3 through one
 * connection, so two transactions started concurrently would collide ("cannot start a transaction
 * within a transaction") or nest; on SQLite they therefore run one after another. PostgreSQL uses
 * the pool. The run path does not come here: its writes go through the one writer (hot/), which
 * waits while such a transaction is open on the shared SQLite connection.
 */
@Injectable()
export class Transactions {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(@InjectDataSource() private readonly db: DataSource) {}

  run<T>(work: (m: EntityManager) => Promise<T>): Promise<T> {
    if (this.db.options.type !== 'better-sqlite3') {
      return this.db.transaction(work);
    }
    const next = this.tail.then(() => this.db.transaction(work));
    this.tail = next.catch(() => undefined);
    return next;
  }
}
