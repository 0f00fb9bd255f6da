import { Global, Module, type DynamicModule } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { dataSourceOptions } from './data-source';
import { DbSessions } from './db-sessions';
import { openDataSource } from './migrate';
import { PostgresVersionError } from './pg-version';
import { Transactions } from './transactions';
import { HotStore } from './hot/hot-store';
import { ENTITIES } from './entities';
import { AgentsRepository } from './repositories/agents.repository';
import { ApiKeysRepository } from './repositories/api-keys.repository';
import { ContextRepository } from './repositories/context.repository';
import { StoresRepository } from './repositories/stores.repository';
import { PluginsRepository } from './repositories/plugins.repository';
import { RunsRepository } from './repositories/runs.repository';
import { ModelsRepository } from './repositories/models.repository';
import { ToolsRepository } from './repositories/tools.repository';
import { KnowledgeRepository } from './repositories/knowledge.repository';
import { SteeringRepository } from './repositories/steering.repository';
import { WorkspacesRepository } from './repositories/workspaces.repository';
import { HostProcessesRepository } from './repositories/host-processes.repository';
import { CatalogVersionRepository } from './repositories/catalog-version.repository';
import { AdmissionReadsRepository } from './repositories/admission-reads.repository';
import { RunnerPresenceRepository } from './repositories/runner-presence.repository';
import { RetentionJob } from './retention/retention-job';

const REPOSITORIES = [
  Transactions,
  HotStore,
  ApiKeysRepository,
  PluginsRepository,
  AgentsRepository,
  RunsRepository,
  ContextRepository,
  StoresRepository,
  ToolsRepository,
  ModelsRepository,
  KnowledgeRepository,
  SteeringRepository,
  WorkspacesRepository,
  HostProcessesRepository,
  CatalogVersionRepository,
  RunnerPresenceRepository,
  AdmissionReadsRepository,
];

@Global()
@Module({})
export class PersistenceModule {
  static forRoot(): DynamicModule {
    // One identity for every connection of this process (the data source's pool is made before
    // any provider here: both take the one instance).
    let sessions: DbSessions | undefined;
    const sessionsOf = (config: AppConfig): DbSessions =>
      (sessions ??= new DbSessions(
        undefined,
        config.database.type === 'postgres' ? (config.database.idleInTransactionMs ?? null) : null,
      ));
    return {
      module: PersistenceModule,
      imports: [
        TypeOrmModule.forRootAsync({
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({
            ...dataSourceOptions(config.database, sessionsOf(config)),
            // A server too old for the host is refused at once, not retried (docs/deployment.md#postgresql-version).
            toRetry: (e: unknown) => !(e instanceof PostgresVersionError),
          }),
          // Several processes on one PostgreSQL migrate once, under a lock (migrate.ts).
          dataSourceFactory: (options) => openDataSource(options!),
        }),
        TypeOrmModule.forFeature(ENTITIES),
      ],
      providers: [...REPOSITORIES, RetentionJob, { provide: DbSessions, inject: [APP_CONFIG], useFactory: sessionsOf }],
      exports: [...REPOSITORIES, RetentionJob, DbSessions],
    };
  }
}
