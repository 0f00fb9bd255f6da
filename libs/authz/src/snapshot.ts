import type { STATE_SCOPES } from '@libs/protocol';

export type StateScope = (typeof STATE_SCOPES)[number];
export type StorageArea = 'plugin' | 'workspace' | 'binding';

export interface ApiFlags {
  prompt_get: boolean;
  history_page: boolean;
  history_search: boolean;
  event_get: boolean;
  event_page: boolean;
  state: boolean;
  storage: boolean;
  steering_pull: boolean;
  run_get: boolean;
}
export type ApiFlag = keyof ApiFlags;

export interface GrantedModel {
  model_id: string;
  model_type: string;
  provider: string;
  operations: string[];
}

export interface GrantedTool {
  tool_name: string;
  tool_type: string;
  description: string;
  operations: string[];
  parameters: Record<string, unknown> | null;
  source: string;
  source_id: string | null;
  /** MCP metadata, when the server gave it (see CatalogTool). */
  title?: string;
  annotations?: Record<string, unknown>;
  output_schema?: Record<string, unknown>;
}

export interface GrantedKnowledgeBase {
  kb_id: string;
  kb_name: string;
  kb_type: string;
  operations: string[];
}

/** Who and what a run is about; fixed at admission. */
export interface RunScope {
  agent_id: string;
  runner_id: string;
  plugin_id: string;
  conversation_id: string | null;
  thread_id: string | null;
  bot_id: string | null;
  workspace_id: string | null;
  actor_type: string | null;
  actor_id: string | null;
  subject_type: string | null;
  subject_id: string | null;
}

/**
 * What one run may touch, frozen at admission (docs/protocol.md#the-authorization-snapshot):
 * manifest ∩ agent policy ∩ run scope. Persisted with the run and content-hashed; every host API
 * call is checked against it.
 */
export interface AuthorizationSnapshot {
  version: 1;
  run_id: string;
  scope: RunScope;
  resources: { models: GrantedModel[]; tools: GrantedTool[]; knowledge_bases: GrantedKnowledgeBase[] };
  available_apis: ApiFlags;
  /** Enabled state scopes that have an identity in this run, with their isolation keys. */
  state: { scopes: StateScope[]; scope_keys: Partial<Record<StateScope, string>> };
  /** Granted storage areas with the owner each resolves to. */
  storage: Partial<Record<StorageArea, string>>;
  prompt: { role: string; content: string }[];
  /**
   * `["request"]` when the run may ask through structured interactions (docs/interactions.md):
   * capability, permission and the agent's delivery policy `enable_interactions`; else `[]`.
   */
  interactions: 'request'[];
  limits: {
    max_payload_bytes: number;
    max_state_value_bytes: number;
    max_storage_value_bytes: number;
    calls_per_second: number;
    burst: number;
  };
  deadline_at_ms: number | null;
}
