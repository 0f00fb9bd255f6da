import { AgentEntity } from './agent.entity';
import { ApiKeyEntity } from './api-key.entity';
import { EventEntity } from './event.entity';
import { PluginEntity } from './plugin.entity';
import { RunResultEntity } from './run-result.entity';
import { RunEntity } from './run.entity';
import { RunnerEntity } from './runner.entity';
import { AuditEntity } from './audit.entity';
import { EventLogEntity } from './event-log.entity';
import { StateEntryEntity } from './state-entry.entity';
import { StorageEntryEntity } from './storage-entry.entity';
import { TranscriptEntity } from './transcript.entity';
import { SteeringItemEntity } from './steering-item.entity';
import { KbChunkEntity, KbDocumentEntity, KnowledgeBaseEntity } from './knowledge.entity';
import { ModelEntity, ModelUsageEntity } from './model.entity';
import { ToolEntity, ToolSourceEntity } from './tool.entity';
import { InteractionEntity } from './interaction.entity';
import { WorkspaceEntity } from './workspace.entity';
import { HostProcessEntity } from './host-process.entity';
import { SnapshotEntity } from './snapshot.entity';

export {
  KbChunkEntity,
  KbDocumentEntity,
  KnowledgeBaseEntity,
  ModelEntity,
  ModelUsageEntity,
  ToolEntity,
  ToolSourceEntity,
  AgentEntity,
  ApiKeyEntity,
  AuditEntity,
  EventEntity,
  EventLogEntity,
  PluginEntity,
  RunEntity,
  RunResultEntity,
  RunnerEntity,
  StateEntryEntity,
  StorageEntryEntity,
  TranscriptEntity,
  SteeringItemEntity,
  InteractionEntity,
  WorkspaceEntity,
  HostProcessEntity,
  SnapshotEntity,
};
export type { ApiKeyRole } from './api-key.entity';
export type { InteractionStatus } from './interaction.entity';
export type { HostProcessState } from './host-process.entity';
export type { JsonObject, JsonValue } from './columns';

export const ENTITIES = [
  ApiKeyEntity,
  PluginEntity,
  RunnerEntity,
  AgentEntity,
  EventEntity,
  RunEntity,
  RunResultEntity,
  TranscriptEntity,
  EventLogEntity,
  StateEntryEntity,
  StorageEntryEntity,
  AuditEntity,
  ModelEntity,
  ModelUsageEntity,
  ToolSourceEntity,
  ToolEntity,
  KnowledgeBaseEntity,
  KbDocumentEntity,
  KbChunkEntity,
  SteeringItemEntity,
  InteractionEntity,
  WorkspaceEntity,
  HostProcessEntity,
  SnapshotEntity,
];
