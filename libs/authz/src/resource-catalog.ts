export interface CatalogModel {
  model_id: string;
  model_type: 'llm' | 'rerank';
  provider: string;
  /** Tokens the model can take (chat models); shown to runners as `model_context_window_tokens`. */
  context_window?: number | null;
  /** The owning workspace and whether it is shared (docs/tenancy.md#resources); absent: the host's own. */
  workspace_id?: string;
  shared?: boolean;
}

export interface CatalogTool {
  tool_name: string;
  description: string;
  parameters: Record<string, unknown> | null;
  source: string;
  source_id: string | null;
  /** MCP metadata, present only when the server gave it. */
  title?: string;
  /** MCP ToolAnnotations: readOnlyHint, destructiveHint, idempotentHint, openWorldHint, title. */
  annotations?: Record<string, unknown>;
  /** JSON schema of the tool's `structured_content`. */
  output_schema?: Record<string, unknown>;
  /** The owning workspace and whether it is shared (docs/tenancy.md#resources); absent: the host's own. */
  workspace_id?: string;
  shared?: boolean;
}

export interface CatalogKnowledgeBase {
  kb_id: string;
  kb_name: string;
  kb_type: string;
  /** The owning workspace and whether it is shared (docs/tenancy.md#resources); absent: the host's own. */
  workspace_id?: string;
  shared?: boolean;
}

/** The host-held resources agents may be granted (models, tools, knowledge bases). */
export interface ResourceCatalog {
  models(): Promise<CatalogModel[]>;
  tools(): Promise<CatalogTool[]>;
  knowledgeBases(): Promise<CatalogKnowledgeBase[]>;
}

export const RESOURCE_CATALOG = Symbol('RESOURCE_CATALOG');
