import type { ToolEntity } from '@libs/persistence';
import type { BuiltinTool } from './builtin-tools';
import type { HttpToolSpec, McpSpec, SourceSpec } from './tool-config';

/** What `call_tool` executes: the implementation the frozen `{source, source_id}` names, as it is now. */
export type ToolTarget =
  | { kind: 'builtin'; tool: BuiltinTool }
  | { kind: 'http'; row: ToolEntity; sourceId: string; spec: Extract<SourceSpec, { kind: 'http' }>; http: HttpToolSpec }
  | { kind: 'mcp'; row: ToolEntity; sourceId: string; spec: McpSpec };
