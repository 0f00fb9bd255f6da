export { ResourcesModule } from './resources.module';
export type { ResourceCall } from './resource-call';
export { ModelsService } from './models/models.service';
export { ModelRegistry } from './models/model-registry.service';
export { ToolsService } from './tools/tools.service';
export { ToolSourcesService, type ToolSourceView, type ToolView } from './tools/tool-sources.service';
export { KnowledgeService, type RetrieveRequest } from './knowledge/knowledge.service';
export type {
  CountTokensInput,
  ModelCallInput,
  ModelCallOutput,
  ModelStreamItem,
  RerankCallInput,
  RerankCallOutput,
} from './models/model-requests';
