import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { DomainError } from '@libs/protocol';
import type { McpClientPool } from './mcp-client-pool';
import { errorResult, isPlainObject, type ToolResult } from './tool-result';
import type { ToolTarget } from './tool-registry.service';

type McpTarget = Extract<ToolTarget, { kind: 'mcp' }>;

/**
 * Calls one MCP tool on the source's live connection (connecting when there is none). The
 * server's answer is the result — `isError` results and JSON-RPC errors alike come back as
 * `is_error` results. A lost connection is `unavailable` (the next call reconnects); an HTTP
 * session the server no longer knows is reconnected and the call sent once more (the server did
 * not run it). Timeouts are the caller's: `signal` aborts the request (and the SDK tells the
 * server to cancel it).
 */
export async function callMcpTool(
  pool: McpClientPool,
  target: McpTarget,
  args: Record<string, unknown>,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<ToolResult> {
  for (let attempt = 0; ; attempt++) {
    const { client } = await pool.acquire(target.sourceId, target.spec);
    try {
      const r = await client.callTool({ name: target.row.source_tool_name, arguments: args }, undefined, {
        signal,
        // The caller's timer fires first; this only keeps the SDK's own 60 s default out of the way.
        timeout: timeoutMs + 5_000,
      });
      const result: ToolResult = {
        is_error: r.isError === true,
        content: Array.isArray(r.content) ? (r.content as Record<string, unknown>[]) : [],
      };
      if (isPlainObject(r.structuredContent)) {
        result.structured_content = r.structuredContent;
      }
      return result;
    } catch (e) {
      if (signal.aborted) {
        throw e;
      }
      const code = e instanceof McpError ? e.code : null;
      if (code !== null && code !== (ErrorCode.ConnectionClosed as number)) {
        if (code === (ErrorCode.RequestTimeout as number)) {
          throw new DomainError('deadline_exceeded', `MCP tool ${target.row.tool_name} timed out`);
        }
        return errorResult((e as McpError).message);
      }
      pool.invalidate(target.sourceId, client);
      if (attempt === 0 && e instanceof StreamableHTTPError && e.code === 404) {
        continue;
      }
      throw new DomainError(
        'unavailable',
        `MCP source ${target.sourceId}: the connection failed during the call: ${(e as Error).message}`,
        { source_id: target.sourceId },
      );
    }
  }
}
