import type { JsonObject, LocalAgentHostPort, ToolDefinition, ToolGrant } from '../host-port';
import { RunStopped, type RunControls } from '../run/controls';

/** A tool the agent itself serves (skills), not a host tool. */
export interface LocalTool {
  definition: ToolDefinition;
  run(parameters: JsonObject): Promise<unknown>;
}

const EMPTY_SCHEMA: JsonObject = { type: 'object', properties: {} };

export const toolDefinition = (name: string, description: string, parameters: JsonObject | null): ToolDefinition => ({
  type: 'function',
  function: { name, description, parameters: parameters ?? EMPTY_SCHEMA },
});

/**
 * The LLM tool list of a run (docs/local-agent.md#the-tool-list): granted tools sorted by name, the inline schema
 * when the host sent one, else tool.detail; a tool whose detail fails is left out. Local tools
 * follow; a host tool of the same name wins.
 */
export async function buildToolDefinitions(
  port: LocalAgentHostPort,
  controls: RunControls,
  grants: readonly ToolGrant[],
  localTools: ReadonlyMap<string, LocalTool>,
  warn: (message: string) => void,
): Promise<ToolDefinition[]> {
  const byName = new Map<string, ToolGrant>();
  for (const g of grants) {
    if (g && typeof g.tool_name === 'string' && g.tool_name !== '' && !byName.has(g.tool_name)) {
      byName.set(g.tool_name, g);
    }
  }
  const names = [...byName.keys()].sort();
  const built = await Promise.all(
    names.map(async (name): Promise<ToolDefinition | null> => {
      const grant = byName.get(name)!;
      if (grant.parameters !== null && grant.parameters !== undefined) {
        return toolDefinition(name, grant.description ?? '', grant.parameters);
      }
      try {
        const detail = await controls.race(port.getToolDetail(name));
        return toolDefinition(name, detail.description ?? grant.description ?? '', detail.parameters ?? null);
      } catch (e) {
        if (e instanceof RunStopped) {
          throw e;
        }
        warn(`Tool detail fetch failed; skipping tool: ${name}`);
        return null;
      }
    }),
  );
  const defs = built.filter((d): d is ToolDefinition => d !== null);
  for (const [name, tool] of localTools) {
    if (!byName.has(name)) {
      defs.push(tool.definition);
    }
  }
  return defs;
}
