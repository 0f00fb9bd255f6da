import { Inject, Injectable, Logger } from '@nestjs/common';
import { SIGNAL_BUS, type SignalBus } from '@libs/cluster';
import { CatalogVersionRepository } from '@libs/persistence';

/** The bus channel of the wake-up sent after an admin write (docs/scale-out.md#admin-writes). */
export const CATALOG_CHANNEL = 'catalog';

/**
 * The version of everything admission reads from memory (agents, runners' policies, the resource
 * catalogue), as a database truth (docs/scale-out.md#admin-writes): one row, bumped by a trigger
 * in the same transaction as every write of a catalogue table, at whichever process wrote it. A
 * cache tagged with an older version than `current()` is never used, so a model deleted at one
 * process is never granted by a run admitted at another after the delete committed.
 *
 * `current()` is one single-row read whose query starts after the call (or after the instant the
 * caller's admission began: one read per admission); concurrent callers share the next read (never
 * one already in flight that started before their instant, which could predate a commit they must
 * see), so admissions under load cost at most one read in flight plus one queued.
 */
@Injectable()
export class CatalogVersions {
  private readonly logger = new Logger('CatalogVersions');
  private inflight: Promise<number> | null = null;
  private queued: Promise<number> | null = null;
  /** The latest read started, with the instant it started (before its query was sent). */
  private last: { startedAt: number; read: Promise<number> } | null = null;
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly store: CatalogVersionRepository,
    @Inject(SIGNAL_BUS) private readonly bus: SignalBus,
  ) {
    bus.subscribe(CATALOG_CHANNEL, () => this.wake());
  }

  /**
   * The committed version, read by a query that starts after `notBefore` (a `performance.now()`
   * instant; default: this call). One admission passes the instant it began to each of its reads
   * (docs/scale-out.md#admin-writes): a read any of them started after it serves them all.
   */
  current(notBefore: number = performance.now()): Promise<number> {
    const last = this.last;
    if (last && last.startedAt >= notBefore) {
      return last.read;
    }
    if (!this.inflight) {
      const startedAt = performance.now();
      const read = this.store.read().finally(() => {
        if (this.inflight === read) {
          this.inflight = null;
        }
      });
      this.inflight = read;
      const entry = { startedAt, read };
      this.last = entry;
      // A failed read serves nobody else.
      read.catch(() => {
        if (this.last === entry) {
          this.last = null;
        }
      });
      return read;
    }
    // A read is in flight: it may have started before a commit this caller must see. Wait for
    // it to settle and share the read that starts then.
    this.queued ??= this.inflight
      .catch(() => undefined)
      .then(() => {
        this.queued = null;
        return this.current();
      });
    return this.queued;
  }

  /**
   * A read of the version row that another statement made, its query sent at or after
   * `startedAt` (admission's reads ahead carry the row: AdmissionReadsRepository): served to the
   * callers whose instant it follows, as a read of this class's own — one statement per admission
   * instead of two on PostgreSQL. When it fails, those callers get a read of their own instead (the
   * reads ahead are not the admission's to fail).
   */
  seed(startedAt: number, version: Promise<number>): void {
    if (this.last && this.last.startedAt >= startedAt) {
      return;
    }
    const entry = { startedAt, read: version.catch(() => this.store.read()) };
    this.last = entry;
    entry.read.catch(() => {
      if (this.last === entry) {
        this.last = null;
      }
    });
  }

  /**
   * After an admin write answered (committed, its version bumped by the trigger): wakes this and
   * the other processes to drop their caches early. A wake-up only: admission reads the row anyway.
   */
  written(): void {
    this.bus.publish(CATALOG_CHANNEL, '{}');
  }

  /** Called on every wake-up (this process's writes and the others'); returns the unsubscribe. */
  onWritten(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private wake(): void {
    for (const l of [...this.listeners]) {
      try {
        l();
      } catch (e) {
        this.logger.error({ msg: `catalog wake-up listener failed: ${e instanceof Error ? e.message : String(e)}` });
      }
    }
  }
}
