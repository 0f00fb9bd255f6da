export { ResourcesModule } from './resources.module';
export type { ResourceCall } from './resource-call';
export { ModelsService } from './models/models.service';
export { ModelRegistry } from './models/model-registry.service';
export { ToolsService } from './tools/tools.service';
export {
  ElicitationBroker,
  type ElicitationParams,
  type ElicitationRequester,
  type ElicitResult,
} from './tools/elicitation';
export type { ToolProgressEvent } from './tools/tool-progress';
export { ToolSourcesService, type ToolSourceView, type ToolView } from './tools/tool-sources.service';
export { KnowledgeService, type RetrieveRequest } from './knowledge/knowledge.service';
export { KnowledgeUploads, KB_BATCH } from './knowledge/knowledge-uploads';
// The tool-source config schemas, for the OpenAPI document (one per kind).
export { SOURCE_KINDS, mcpStdioConfig, mcpHttpConfig, httpSourceConfig } from './tools/tool-config';
export type {
  CountTokensInput,
  ModelCallInput,
  ModelCallOutput,
  ModelStreamItem,
  RerankCallInput,
  RerankCallOutput,
} from './models/model-requests';
export {
  MODEL_KINDS,
  MODEL_LIMITS,
  TOKENIZERS,
  PROVIDER_PATTERN,
  PROVIDER_RULE,
  ENV_NAME_PATTERN,
  ENV_NAME_RULE,
  type ModelInput,
  type TokenizerName,
} from './models/model-types';
