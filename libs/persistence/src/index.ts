export * from './entities';
export { dataSourceOptions } from './data-source';
export { MIGRATIONS } from './migrations';
export { PersistenceModule } from './persistence.module';
export { AgentsRepository } from './repositories/agents.repository';
export { ApiKeysRepository } from './repositories/api-keys.repository';
export { PluginsRepository } from './repositories/plugins.repository';
export { RunsRepository, type RunListFilter, type RunFinal } from './repositories/runs.repository';
