import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import Sqlite, { type Database } from 'better-sqlite3';
import type { DataSource } from 'typeorm';
import { BetterSqlite3Driver } from 'typeorm/driver/better-sqlite3/BetterSqlite3Driver';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { telemetry } from '@libs/telemetry';
import { Checkpointer, type WalStatus } from './checkpointer';
import { DbSessions } from '../db-sessions';
import { PgHot } from './pg-driver';
import { busyRetryOf } from '../busy-retry';
import { sqliteReadConnectionOf } from '../sqlite-query-runner';
import { SqliteHot } from './sqlite-driver';
import { indexTranscriptUnit, pendingTranscriptUnit } from './transcript-index';
import type { Unit } from './unit';
import { DEFER_MS, MAX_DEFERRED, WriteQueue, type Deferred, type WriterStats } from './write-queue';

const MiB = 1024 * 1024;
/** The background transcript indexing (transcript-index.ts): how often, and at most how many rows a pass. */
const INDEX_INTERVAL_MS = 1000;
const INDEX_ROWS_PER_PASS = 20_000;

/**
 * The hot-path store: one writer per database with group commit, and prepared reads. On SQLite
 * the writer shares TypeORM's connection (an in-memory database has no other) and never starts
 * while an admin transaction is open on it; its own transactions run synchronously, so they can
 * neither join nor be joined. Its reads run on the host's read-only connection (TypeORM's reads
 * do too: sqlite-query-runner.ts), which sees only committed rows (docs/durability.md). On
 * PostgreSQL the writer has a connection of its own.
 */
@Injectable()
export class HotStore implements OnModuleDestroy {
  private readonly queue: WriteQueue;
  private readonly sqlite?: SqliteHot;
  private readonly pg?: PgHot;
  private readonly checkpointer?: Checkpointer;
  private readonly indexer?: NodeJS.Timeout;

  constructor(@InjectDataSource() ds: DataSource, @Inject(APP_CONFIG) config: AppConfig, sessions: DbSessions) {
    if (config.database.type === 'postgres') {
      this.pg = new PgHot(config.database.url, sessions);
      this.queue = new WriteQueue(this.pg);
    } else {
      const db = sqliteConnectionOf(ds);
      // Reads outside a group on the read-only connection: never an open admin transaction's rows.
      this.sqlite = new SqliteHot(db, sqliteReadConnectionOf(ds));
      // One bound for a busy writer lock, here and in TypeORM's runner (SQLITE_BUSY_WAIT_MS).
      this.queue = new WriteQueue(this.sqlite, 256, DEFER_MS, MAX_DEFERRED, busyRetryOf(config.database.busyWaitMs));
      if (config.database.file !== ':memory:') {
        this.checkpointer = new Checkpointer(config.database.file, {
          walBytesTrigger: 4 * MiB,
          intervalMs: 1000,
          walBytesCap: 256 * MiB,
          idleTruncateMs: 2000,
        });
      }
      this.indexer = setInterval(() => this.indexInBackground(), INDEX_INTERVAL_MS);
      this.indexer.unref();
    }
    telemetry.sample('writer_queue_depth', () => this.queue.depth);
    telemetry.sample('wal_bytes', () => this.checkpointer?.status.wal_bytes ?? null);
  }

  get dialect(): 'sqlite' | 'postgres' {
    return this.pg ? 'postgres' : 'sqlite';
  }

  /** Queues a unit of work; resolves after the transaction that carried it committed. */
  write<T>(unit: () => Unit<T>): Promise<T> {
    return this.queue.submit(unit);
  }

  /**
   * Queues a unit its caller need not wait for: it joins the next group commit, at the latest a
   * few milliseconds later (WriteQueue.defer; what a crash can lose: docs/durability.md).
   */
  writeDeferred<T>(unit: () => Unit<T>): Deferred<T> {
    return this.queue.defer(unit);
  }

  /** Resolves once every unit queued before it (deferred ones too) is committed or failed. */
  committed(): Promise<void> {
    return this.queue.barrier();
  }

  /** A read of committed data (never a pending write of the queue). */
  read<T>(unit: Unit<T>): Promise<T> {
    if (this.sqlite) {
      try {
        return Promise.resolve(this.sqlite.read(unit));
      } catch (e) {
        return Promise.reject(e instanceof Error ? e : new Error(String(e)));
      }
    }
    return this.pg!.read(unit);
  }

  /**
   * SQLite: indexes every transcript row committed so far for full-text search (through the
   * writer, so after everything submitted before); the search calls it first. PostgreSQL indexes
   * at insert: nothing to do.
   */
  async indexTranscript(): Promise<void> {
    if (this.sqlite) {
      await this.write(() => indexTranscriptUnit());
    }
  }

  /**
   * A background pass of the transcript index, outside the write queue and its group commits:
   * only while the connection is free (no writer group or admin transaction open on it, no unit
   * waiting but deferred ones), and only when rows wait. A failure is left to the next pass or the next search.
   */
  private indexInBackground(): void {
    const db = this.sqlite;
    // Deferred units (read calls' audit rows) may wait: under a steady read load some always do.
    if (!db || !db.ready() || !this.queue.idle) {
      return;
    }
    try {
      if (db.read(pendingTranscriptUnit())) {
        db.runGroup([() => indexTranscriptUnit(INDEX_ROWS_PER_PASS)]);
      }
    } catch {
      // The database is closing or busy; the next pass or search catches up.
    }
  }

  /** Everything submitted so far is committed (or failed). */
  drain(): Promise<void> {
    return this.queue.drain();
  }

  get writerStats(): WriterStats {
    return this.queue.stats;
  }

  /** SQLite file databases: the WAL size the checkpoint worker last saw. */
  wal(): (WalStatus & { checkpoint_error: string | null }) | null {
    return this.checkpointer ? { ...this.checkpointer.status, checkpoint_error: this.checkpointer.lastError } : null;
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.indexer);
    await this.queue.close();
    await this.checkpointer?.stop();
  }
}

/**
 * The better-sqlite3 connection TypeORM opened (the hot writer shares it, docs/durability.md):
 * `databaseConnection` is the driver's public field, typed `any` by TypeORM, so it is checked here.
 */
export function sqliteConnectionOf(ds: DataSource): Database {
  const driver = ds.driver;
  if (!(driver instanceof BetterSqlite3Driver)) {
    throw new Error(`HotStore: the data source's driver is ${driver.options.type}, expected better-sqlite3`);
  }
  const connection: unknown = driver.databaseConnection;
  if (!(connection instanceof Sqlite)) {
    throw new Error('HotStore: the better-sqlite3 driver has no open connection (is the data source initialized?)');
  }
  return connection;
}
