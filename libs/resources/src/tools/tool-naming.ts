import { createHash } from 'node:crypto';

/** A tool as its source lists it. */
export interface ListedTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  /** MCP metadata kept for the admin listing, the run context and GetToolDetail. */
  metadata?: ToolMetadata;
}

/** What an MCP server says about a tool besides its name, description and input schema. */
export interface ToolMetadata {
  title?: string;
  /** MCP ToolAnnotations (readOnlyHint, destructiveHint, idempotentHint, openWorldHint, title). */
  annotations?: Record<string, unknown>;
  output_schema?: Record<string, unknown>;
  /** MCP `execution.taskSupport`: `required` tools are called as tasks. */
  task_support?: 'required' | 'optional' | 'forbidden';
}

export interface NamedTool extends ListedTool {
  /** The name runners see. */
  tool_name: string;
}

export interface Naming {
  named: NamedTool[];
  /** Tools left out, with why. */
  skipped: { name: string; reason: string }[];
}

/** Longest source tool name taken (the `source_tool_name` column holds 255). */
export const MAX_SOURCE_TOOL_NAME = 255;

/** What OpenAI and Anthropic accept as a function name: every exposed name matches it. */
export const EXPOSED_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export const prefixedName = (sourceId: string, name: string) => `${sourceId}__${name}`;

/**
 * The derived name of a tool whose own and prefixed names cannot be used: its name with every
 * character outside `[A-Za-z0-9_-]` made `_`, cut to 55 characters, then `_` and 8 hex digits of
 * SHA-256 over the source id and the original name — so it is valid, stable across restarts and
 * re-listings, and distinct for distinct originals.
 */
export function hashedName(sourceId: string, name: string): string {
  const hash = createHash('sha256').update(`${sourceId}\n${name}`).digest('hex').slice(0, 8);
  const readable = name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 55);
  return `${readable}_${hash}`;
}

/**
 * The naming rule. Every exposed name is 1-64 characters of `[A-Za-z0-9_-]` (valid for the
 * OpenAI and Anthropic function-calling APIs) and unique; calls use the tool's original name.
 * In order, a tool gets the first of these that is valid and free:
 * 1. its own name (not reserved for a built-in, not held by another source);
 * 2. `<source_id>__<name>`;
 * 3. `hashedName(source_id, name)` (names too long or with other characters land here).
 * A tool for which none is free, or listed twice by its source, or whose name is empty or over
 * MAX_SOURCE_TOOL_NAME characters, is skipped (shown in `skipped_tools`). The rule runs each time
 * a source is (re)listed, against the names other sources hold, so the source registered first
 * keeps a plain name, and a name freed by a deleted source goes to the next source listed.
 */
export function nameTools(
  sourceId: string,
  listed: ListedTool[],
  taken: ReadonlySet<string>,
  reserved: ReadonlySet<string>,
): Naming {
  const used = new Set<string>();
  const seen = new Set<string>();
  const named: NamedTool[] = [];
  const skipped: Naming['skipped'] = [];
  const free = (n: string) => EXPOSED_NAME.test(n) && !reserved.has(n) && !taken.has(n) && !used.has(n);
  for (const tool of listed) {
    if (!tool.name || tool.name.length > MAX_SOURCE_TOOL_NAME) {
      skipped.push({ name: tool.name, reason: `the name must be 1-${MAX_SOURCE_TOOL_NAME} characters` });
      continue;
    }
    if (seen.has(tool.name)) {
      skipped.push({ name: tool.name, reason: 'listed twice by the source' });
      continue;
    }
    seen.add(tool.name);
    const candidates = [tool.name, prefixedName(sourceId, tool.name), hashedName(sourceId, tool.name)];
    const toolName = candidates.find(free);
    if (!toolName) {
      skipped.push({ name: tool.name, reason: `"${tool.name}", its prefixed and its hashed names are all taken` });
      continue;
    }
    used.add(toolName);
    named.push({ ...tool, tool_name: toolName });
  }
  return { named, skipped };
}
