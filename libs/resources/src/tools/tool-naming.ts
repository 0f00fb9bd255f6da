/** A tool as its source lists it. */
export interface ListedTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
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

/** Longest source tool name taken (with the `<source_id>__` prefix it still fits the 255-character column). */
export const MAX_SOURCE_TOOL_NAME = 180;

export const prefixedName = (sourceId: string, name: string) => `${sourceId}__${name}`;

/**
 * The collision rule. A source's tool keeps its own name unless that name is reserved (a built-in
 * tool's name, whether the built-in is on or not) or a tool of another source already holds it —
 * the source registered (listed) first keeps the plain name; later ones get
 * `<source_id>__<name>`. If even that is taken the tool is skipped. Within one source a repeated
 * name is skipped. The rule runs each time a source is (re)listed, so a name freed by a deleted
 * source goes to the next source listed that offers it.
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
  const free = (n: string) => !reserved.has(n) && !taken.has(n) && !used.has(n);
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
    const toolName = [tool.name, prefixedName(sourceId, tool.name)].find(free);
    if (!toolName) {
      skipped.push({ name: tool.name, reason: `both "${tool.name}" and its prefixed name are taken` });
      continue;
    }
    used.add(toolName);
    named.push({ ...tool, tool_name: toolName });
  }
  return { named, skipped };
}
