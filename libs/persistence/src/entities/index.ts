import { AgentEntity } from './agent.entity';
import { ApiKeyEntity } from './api-key.entity';
import { EventEntity } from './event.entity';
import { PluginEntity } from './plugin.entity';
import { RunResultEntity } from './run-result.entity';
import { RunEntity } from './run.entity';
import { RunnerEntity } from './runner.entity';

export { AgentEntity, ApiKeyEntity, EventEntity, PluginEntity, RunEntity, RunResultEntity, RunnerEntity };
export type { ApiKeyRole } from './api-key.entity';
export type { JsonObject, JsonValue } from './columns';

export const ENTITIES = [
  ApiKeyEntity,
  PluginEntity,
  RunnerEntity,
  AgentEntity,
  EventEntity,
  RunEntity,
  RunResultEntity,
];
