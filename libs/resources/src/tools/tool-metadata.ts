import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { ToolMetadata } from './tool-naming';

/** The stored `tools.metadata` column, read back defensively (rows listed before it existed hold `{}`). */
const storedMetadata = z.object({
  title: z.string().optional().catch(undefined),
  annotations: z.record(z.string(), z.unknown()).optional().catch(undefined),
  output_schema: z.record(z.string(), z.unknown()).optional().catch(undefined),
  task_support: z.enum(['required', 'optional', 'forbidden']).optional().catch(undefined),
});

/** What the host keeps of an MCP tool listing besides name, description and input schema. */
export function mcpMetadata(t: Tool): ToolMetadata {
  const m: ToolMetadata = {};
  const title = t.title ?? t.annotations?.title;
  if (title) {
    m.title = title;
  }
  if (t.annotations && Object.keys(t.annotations).length > 0) {
    m.annotations = { ...t.annotations };
  }
  if (t.outputSchema) {
    m.output_schema = t.outputSchema;
  }
  if (t.execution?.taskSupport) {
    m.task_support = t.execution.taskSupport;
  }
  return m;
}

export function readMetadata(stored: unknown): ToolMetadata {
  const r = storedMetadata.safeParse(stored ?? {});
  return r.success ? r.data : {};
}

/**
 * The metadata runners and admins see (catalogue, snapshot, run context, GetToolDetail, admin
 * listing): title, annotations, output schema — only the keys the server gave.
 */
export function catalogMetadata(stored: unknown): Pick<ToolMetadata, 'title' | 'annotations' | 'output_schema'> {
  const { title, annotations, output_schema } = readMetadata(stored);
  return {
    ...(title !== undefined ? { title } : {}),
    ...(annotations !== undefined ? { annotations } : {}),
    ...(output_schema !== undefined ? { output_schema } : {}),
  };
}
