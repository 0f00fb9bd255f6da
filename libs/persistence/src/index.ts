export * from './entities';
export { dataSourceOptions } from './data-source';
export { DbSessions, SESSION_PREFIX, sessionName, type DbSessionRole } from './db-sessions';
export { DatabaseLock, DatabaseLockedError, type LockHolder } from './database-lock';
export { MIGRATIONS } from './migrations';
export { MIGRATION_LOCK_KEY, openDataSource, runMigrationsLocked } from './migrate';
export {
  checkPostgresVersion,
  MIN_POSTGRES_VERSION_NUM,
  PostgresVersionError,
  postgresVersionProblem,
} from './pg-version';
export { PersistenceModule } from './persistence.module';
export { AgentsRepository } from './repositories/agents.repository';
export { ApiKeysRepository } from './repositories/api-keys.repository';
export { PluginsRepository } from './repositories/plugins.repository';
export {
  RunsRepository,
  type RunListFilter,
  type RunLiveness,
  type StoredResult,
} from './repositories/runs.repository';
export {
  ContextRepository,
  type ConversationScope,
  type NewTranscriptRow,
  type TranscriptQuery,
} from './repositories/context.repository';
export { CumulativeDeltas } from './repositories/cumulative-deltas';
export { StoresRepository } from './repositories/stores.repository';
export { ToolsRepository, type NewToolRow } from './repositories/tools.repository';
export { ModelsRepository, type NewModelUsage } from './repositories/models.repository';
export {
  KnowledgeRepository,
  type KbChunkHit,
  type KbStats,
  type NewKbChunk,
} from './repositories/knowledge.repository';
export { SteeringRepository, type ConversationTimeline, type SteeringFilter } from './repositories/steering.repository';
export { WorkspacesRepository, type WorkspaceUsageCounts } from './repositories/workspaces.repository';
export { HostProcessesRepository, type NewHostProcess } from './repositories/host-processes.repository';
export { CatalogVersionRepository } from './repositories/catalog-version.repository';
export { AdmissionReadsRepository, type AdmissionReads } from './repositories/admission-reads.repository';
export { CATALOG_TABLES } from './migrations/1767640000000-catalog-version';
export {
  RunnerPresenceRepository,
  type PresenceSession,
  type RunnerHolder,
} from './repositories/runner-presence.repository';
export { DEFAULT_WORKSPACE } from './migrations/1767200000000-workspaces';
export { Transactions } from './transactions';
export { BusyRetryingQueryRunner, retryBusySqlite, sqliteReadConnectionOf } from './sqlite-query-runner';
export { busyRetryOf, isSqliteBusy, type BusyRetry } from './busy-retry';
export { RetentionJob, type RetentionCounts } from './retention/retention-job';
export { retentionBatchUnit, type RetentionTable } from './retention/retention-units';
export * from './hot';
