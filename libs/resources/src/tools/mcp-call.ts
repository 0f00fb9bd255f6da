import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { CallToolResultSchema, ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { DomainError } from '@libs/protocol';
import type { McpClientPool, McpRunScope } from './mcp-client-pool';
import { readMetadata } from './tool-metadata';
import type { ToolProgress } from './tool-progress';
import { errorResult, isPlainObject, type ToolResult } from './tool-result';
import type { ToolTarget } from './tool-target';

type McpTarget = Extract<ToolTarget, { kind: 'mcp' }>;

export interface McpCallOptions {
  /** Aborts the request (the SDK tells the server to cancel it; a task is cancelled too). */
  signal: AbortSignal;
  timeoutMs: number;
  /** Each progress notification (and task status); the caller restarts its timeout on it. */
  onProgress: (p: ToolProgress) => void;
  /** The run may ask a person: the call goes over a connection of its own that offers elicitation. */
  elicit?: McpRunScope | null;
}

/**
 * True when a streamable-HTTP server answered that it does not know the session: the SDK's own
 * server answers 404, the reference servers (and many express-based ones) 400 "No valid session
 * ID provided" or "Server not initialized" — after a restart, or once a session expired. The
 * server did not run the request, so it is safe to send it again on a new session.
 */
export function isLostSession(e: unknown, hadSession: boolean): boolean {
  if (!(e instanceof StreamableHTTPError)) {
    return false;
  }
  return e.code === 404 || (hadSession && e.code === 400 && /session|not initialized/i.test(e.message));
}

/**
 * Calls one MCP tool on the source's live connection (connecting when there is none). The
 * server's answer is the result — `isError` results and JSON-RPC errors alike come back as
 * `is_error` results. A lost connection is `unavailable` (the next call reconnects); an HTTP
 * session the server no longer knows (see isLostSession) is reconnected and the call sent once
 * more. Tools listed with `execution.taskSupport: "required"` are called as MCP tasks (created,
 * polled, result fetched; their status reported as progress). Timeouts are the caller's.
 */
export async function callMcpTool(
  pool: McpClientPool,
  target: McpTarget,
  args: Record<string, unknown>,
  options: McpCallOptions,
): Promise<ToolResult> {
  const { signal, timeoutMs, onProgress } = options;
  const name = target.row.source_tool_name;
  const asTask = readMetadata(target.row.metadata).task_support === 'required';
  for (let attempt = 0; ; attempt++) {
    const { client, release } = await pool.acquire(target.sourceId, target.spec, options.elicit ?? null, signal);
    const hadSession = typeof (client.transport as { sessionId?: string } | undefined)?.sessionId === 'string';
    const request: RequestOptions = {
      signal,
      // The caller's timer fires first; this only keeps the SDK's own 60 s default out of the way.
      timeout: timeoutMs + 5_000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => onProgress({ progress: p.progress, total: p.total, message: p.message }),
    };
    try {
      return await callOnce(client, name, args, request, asTask, onProgress);
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
      if (attempt === 0 && isLostSession(e, hadSession)) {
        continue;
      }
      throw new DomainError(
        'unavailable',
        `MCP source ${target.sourceId}: the connection failed during the call: ${(e as Error).message}`,
        { source_id: target.sourceId },
      );
    } finally {
      release();
    }
  }
}

async function callOnce(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  request: RequestOptions,
  asTask: boolean,
  onProgress: (p: ToolProgress) => void,
): Promise<ToolResult> {
  const r = asTask
    ? await callAsTask(client, name, args, request, onProgress)
    : await client.callTool({ name, arguments: args }, undefined, request);
  const result: ToolResult = {
    is_error: r.isError === true,
    content: Array.isArray(r.content) ? (r.content as Record<string, unknown>[]) : [],
  };
  if (isPlainObject(r.structuredContent)) {
    result.structured_content = r.structuredContent;
  }
  return result;
}

/**
 * A task-based call (MCP tasks): the server answers with a task, the SDK polls it and fetches
 * its result. Each status is a progress report; an abort cancels the task on the server.
 */
async function callAsTask(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  request: RequestOptions,
  onProgress: (p: ToolProgress) => void,
): Promise<CallToolResult> {
  let taskId: string | undefined;
  const cancel = () => {
    if (taskId) {
      client.experimental.tasks.cancelTask(taskId).catch(() => undefined);
    }
  };
  request.signal?.addEventListener('abort', cancel, { once: true });
  try {
    const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
      ...request,
      task: {},
    });
    for await (const message of stream) {
      switch (message.type) {
        case 'taskCreated':
        case 'taskStatus':
          taskId = message.task.taskId;
          onProgress({ task_status: message.task.status, message: message.task.statusMessage });
          break;
        case 'result':
          return message.result;
        case 'error':
          throw message.error;
      }
    }
    throw new McpError(ErrorCode.InternalError, `task-based tool ${name} ended without a result`);
  } finally {
    request.signal?.removeEventListener('abort', cancel);
  }
}
