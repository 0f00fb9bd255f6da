import { Injectable } from '@nestjs/common';
import { admissionReadsApart, admissionReadsUnit, type AdmissionReads } from '../hot/admission-reads';
import { HotStore } from '../hot/hot-store';
import type { ConversationRef } from '../hot/steering-rows';
import type { ConversationScope } from './context.repository';

export type { AdmissionReads } from '../hot/admission-reads';

/**
 * What admission reads of a conversation before its commit — its situation, its thread's latest
 * seq, the run's state entries — as one read (hot/admission-reads.ts): one statement and one
 * round trip on PostgreSQL, the three statements in process on SQLite.
 */
@Injectable()
export class AdmissionReadsRepository {
  constructor(private readonly hot: HotStore) {}

  /**
   * Whether a read is a round trip to a server (PostgreSQL): worth starting ahead, beside another
   * read in flight. On SQLite a read is a synchronous call in process: started ahead, it runs
   * sooner but overlaps nothing (admission does not read ahead there).
   */
  get roundTrips(): boolean {
    return this.hot.dialect === 'postgres';
  }

  read(
    c: ConversationRef,
    thread: ConversationScope,
    scopeKeys: readonly string[],
    limit: number,
  ): Promise<AdmissionReads> {
    return this.hot.read(
      this.hot.dialect === 'postgres'
        ? admissionReadsUnit(c, thread, scopeKeys, limit)
        : admissionReadsApart(c, thread, scopeKeys, limit),
    );
  }
}
