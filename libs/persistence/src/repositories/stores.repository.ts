import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { AuditEntity, StateEntryEntity, StorageEntryEntity } from '../entities';
import { HotStore } from '../hot/hot-store';
import { SQL } from '../hot/hot-sql';
import { auditUnit, stateDeleteUnit, stateSetUnit, storageDeleteUnit, storageSetUnit } from '../hot/run-units';
import { one, rows } from '../hot/unit';
import type { RunLease } from '../hot/run-fence';
import type { Deferred } from '../hot/write-queue';

/**
 * `column` starts with `:prefix`, literally and case-sensitively on both dialects (no LIKE:
 * SQLite's LIKE ignores ASCII case, so "A" would also list "a…" keys there and not on PostgreSQL).
 */
function startsWithPrefix(column: string): string {
  return `SUBSTR(${column}, 1, LENGTH(CAST(:prefix AS TEXT))) = CAST(:prefix AS TEXT)`;
}

/**
 * Key-value stores (state, storage) and the audit log. A write made for a run's host API call
 * takes the run's lease (null: unfenced) and is refused with FencedError, nothing written, when
 * the run is no longer running under it (docs/scale-out.md#fenced-host-api-writes).
 */
@Injectable()
export class StoresRepository {
  constructor(
    @InjectRepository(StateEntryEntity) private readonly state: Repository<StateEntryEntity>,
    @InjectRepository(StorageEntryEntity) private readonly storage: Repository<StorageEntryEntity>,
    @InjectRepository(AuditEntity) private readonly audit: Repository<AuditEntity>,
    private readonly hot: HotStore,
  ) {}

  async stateGet(scopeKey: string, key: string): Promise<string | null> {
    const row = await this.hot.read(one<{ value: string }>(SQL.stateGet, [scopeKey, key]));
    return row ? row.value : null;
  }

  stateSet(scopeKey: string, key: string, value: string, lease: RunLease | null = null): Promise<void> {
    return this.hot.write(() => stateSetUnit({ scope_key: scopeKey, state_key: key, value }, Date.now(), lease));
  }

  stateDelete(scopeKey: string, key: string, lease: RunLease | null = null): Promise<boolean> {
    return this.hot.write(() => stateDeleteUnit(scopeKey, key, lease));
  }

  /** Keys (ordered) with a literal prefix; `limit + 1` rows tell whether there are more. */
  async stateKeys(scopeKey: string, prefix: string, limit: number): Promise<string[]> {
    const rows = await this.state
      .createQueryBuilder('s')
      .select('s.state_key', 'k')
      .where('s.scope_key = :scopeKey', { scopeKey })
      .andWhere(startsWithPrefix('s.state_key'), { prefix })
      .orderBy('s.state_key', 'ASC')
      .limit(limit)
      .getRawMany<{ k: string }>();
    return rows.map((r) => r.k);
  }

  /** Every key and value of a scope, up to `limit` (for the run's state snapshot). */
  async stateEntries(scopeKey: string, limit: number): Promise<Pick<StateEntryEntity, 'state_key' | 'value'>[]> {
    return this.hot.read(rows<{ state_key: string; value: string }>(SQL.stateEntries, [scopeKey, limit]));
  }

  async storageGet(ownerKey: string, key: string): Promise<StorageEntryEntity | null> {
    return this.storage.findOne({ where: { owner_key: ownerKey, key } });
  }

  storageSet(ownerKey: string, key: string, value: Buffer, lease: RunLease | null = null): Promise<void> {
    return this.hot.write(() => storageSetUnit(ownerKey, key, value, Date.now(), lease));
  }

  storageDelete(ownerKey: string, key: string, lease: RunLease | null = null): Promise<boolean> {
    return this.hot.write(() => storageDeleteUnit(ownerKey, key, lease));
  }

  async storageKeys(ownerKey: string, prefix: string, limit: number): Promise<string[]> {
    const rows = await this.storage
      .createQueryBuilder('s')
      .select('s.key', 'k')
      .where('s.owner_key = :ownerKey', { ownerKey })
      .andWhere(startsWithPrefix('s.key'), { prefix })
      .orderBy('s.key', 'ASC')
      .limit(limit)
      .getRawMany<{ k: string }>();
    return rows.map((r) => r.k);
  }

  /** Resolves once the row is committed: a call that returned always left its audit row. */
  appendAudit(row: Omit<AuditEntity, 'id'>, lease: RunLease | null = null): Promise<void> {
    return this.hot.write(() => auditUnit(row, lease));
  }

  /**
   * Queues the row to join the writer's next group commit (a read call's row, written after its
   * answer: docs/durability.md); `wait` says the caller must wait for `committed` all the same.
   */
  appendAuditDeferred(row: Omit<AuditEntity, 'id'>): Deferred<void> {
    return this.hot.writeDeferred(() => auditUnit(row));
  }

  /** The run's audit rows after `afterId`, including every row queued (here) before the read. */
  async auditOf(runId: string, afterId: number, limit: number): Promise<AuditEntity[]> {
    await this.hot.committed();
    return this.audit
      .createQueryBuilder('a')
      .where('a.run_id = :runId AND a.id > :afterId', { runId, afterId })
      .orderBy('a.id', 'ASC')
      .take(limit)
      .getMany();
  }
}
