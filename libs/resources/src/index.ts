export { ResourcesModule } from './resources.module';
export type { ResourceCall } from './resource-call';
export { ModelsService } from './models/models.service';
export { ToolsService } from './tools/tools.service';
export { KnowledgeService, type RetrieveRequest } from './knowledge/knowledge.service';
