import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { AuditEntity, StateEntryEntity, StorageEntryEntity } from '../entities';
import { FastInsert } from '../fast-insert';

const AUDIT_COLUMNS = [
  'run_id',
  'runner_id',
  'plugin_id',
  'action',
  'resource',
  'scope',
  'outcome',
  'error_code',
  'duration_us',
  'created_at',
] as const;

/**
 * `column` starts with `:prefix`, literally and case-sensitively on both dialects (no LIKE:
 * SQLite's LIKE ignores ASCII case, so "A" would also list "a…" keys there and not on PostgreSQL).
 */
function startsWithPrefix(column: string): string {
  return `SUBSTR(${column}, 1, LENGTH(CAST(:prefix AS TEXT))) = CAST(:prefix AS TEXT)`;
}

/** Key-value stores (state, storage) and the audit log. */
@Injectable()
export class StoresRepository {
  constructor(
    @InjectRepository(StateEntryEntity) private readonly state: Repository<StateEntryEntity>,
    @InjectRepository(StorageEntryEntity) private readonly storage: Repository<StorageEntryEntity>,
    @InjectRepository(AuditEntity) private readonly audit: Repository<AuditEntity>,
  ) {
    this.auditInsert = new FastInsert(audit.manager.connection, 'audit_log', AUDIT_COLUMNS);
  }

  private readonly auditInsert: FastInsert;

  async stateGet(scopeKey: string, key: string): Promise<string | null> {
    const row = await this.state.findOne({ where: { scope_key: scopeKey, state_key: key } });
    return row ? row.value : null;
  }

  async stateSet(scopeKey: string, key: string, value: string): Promise<void> {
    await this.state.upsert({ scope_key: scopeKey, state_key: key, value, updated_at: Date.now() }, [
      'scope_key',
      'state_key',
    ]);
  }

  async stateDelete(scopeKey: string, key: string): Promise<boolean> {
    const r = await this.state.delete({ scope_key: scopeKey, state_key: key });
    return (r.affected ?? 0) > 0;
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
  async stateEntries(scopeKey: string, limit: number): Promise<StateEntryEntity[]> {
    return this.state.find({ where: { scope_key: scopeKey }, order: { state_key: 'ASC' }, take: limit });
  }

  async storageGet(ownerKey: string, key: string): Promise<StorageEntryEntity | null> {
    return this.storage.findOne({ where: { owner_key: ownerKey, key } });
  }

  async storageSet(ownerKey: string, key: string, value: Buffer): Promise<void> {
    await this.storage.upsert(
      { owner_key: ownerKey, key, value_base64: value.toString('base64'), size: value.length, updated_at: Date.now() },
      ['owner_key', 'key'],
    );
  }

  async storageDelete(ownerKey: string, key: string): Promise<boolean> {
    const r = await this.storage.delete({ owner_key: ownerKey, key });
    return (r.affected ?? 0) > 0;
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

  async appendAudit(row: Omit<AuditEntity, 'id'>): Promise<void> {
    await this.auditInsert.run(row);
  }

  async auditOf(runId: string, afterId: number, limit: number): Promise<AuditEntity[]> {
    return this.audit
      .createQueryBuilder('a')
      .where('a.run_id = :runId AND a.id > :afterId', { runId, afterId })
      .orderBy('a.id', 'ASC')
      .take(limit)
      .getMany();
  }
}
