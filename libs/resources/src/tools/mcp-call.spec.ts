import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DomainError } from '@libs/protocol';
import { callMcpTool, isLostSession } from './mcp-call';
import type { McpClientPool } from './mcp-client-pool';
import type { ToolProgress } from './tool-progress';
import type { ToolTarget } from './tool-target';

const NO_SESSION = new StreamableHTTPError(
  400,
  'Error POSTing to endpoint: {"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}',
);

describe('isLostSession', () => {
  it.each([
    [
      '404 from the SDK server',
      new StreamableHTTPError(404, 'Error POSTing to endpoint: Session not found'),
      true,
      true,
    ],
    ['400 "No valid session ID" (reference servers)', NO_SESSION, true, true],
    ['400 "Server not initialized"', new StreamableHTTPError(400, 'Bad Request: Server not initialized'), true, true],
    ['400 about the session without one', NO_SESSION, false, false],
    ['400 about something else', new StreamableHTTPError(400, 'Bad Request: invalid JSON'), true, false],
    ['500', new StreamableHTTPError(500, 'Internal error'), true, false],
    ['not an HTTP error', new Error('No valid session ID'), true, false],
  ])('%s', (_why, e, hadSession, expected) => {
    expect(isLostSession(e, hadSession)).toBe(expected);
  });
});

type FakeClient = Record<string, unknown>;

/** A pool handing out the given clients one after another; records invalidations. */
function pool(...clients: FakeClient[]) {
  const invalidated: unknown[] = [];
  const p = {
    acquire: () => Promise.resolve({ client: clients.shift(), fresh: false, release: () => undefined }),
    invalidate: (_id: string, c: unknown) => invalidated.push(c),
  } as unknown as McpClientPool;
  return { p, invalidated };
}

const target = (metadata: Record<string, unknown> = {}) =>
  ({
    kind: 'mcp',
    sourceId: 's',
    spec: { kind: 'mcp_http', config: {} },
    row: { tool_name: 't', source_tool_name: 'orig', metadata },
  }) as unknown as Extract<ToolTarget, { kind: 'mcp' }>;

const opts = (signal = new AbortController().signal, progress: ToolProgress[] = []) => ({
  signal,
  timeoutMs: 1000,
  onProgress: (p: ToolProgress) => progress.push(p),
});

const session = { sessionId: 'old' };
const answer = { content: [{ type: 'text', text: 'ok' }] };

describe('callMcpTool', () => {
  it('reconnects once on a lost session and sends the call again, by its original name', async () => {
    const names: string[] = [];
    const stale = { transport: session, callTool: () => Promise.reject(NO_SESSION) };
    const fresh = {
      transport: { sessionId: 'new' },
      callTool: (p: { name: string }) => (names.push(p.name), Promise.resolve(answer)),
    };
    const { p, invalidated } = pool(stale, fresh);
    expect(await callMcpTool(p, target(), {}, opts())).toEqual({ is_error: false, content: answer.content });
    expect(invalidated).toEqual([stale]);
    expect(names).toEqual(['orig']);
  });

  it('is unavailable when the new session is lost too, or when the answer is not about a session', async () => {
    const lost = () => ({ transport: session, callTool: () => Promise.reject(NO_SESSION) });
    const twice = await callMcpTool(pool(lost(), lost()).p, target(), {}, opts()).catch((e: unknown) => e);
    expect(twice).toBeInstanceOf(DomainError);
    expect((twice as DomainError).code).toBe('unavailable');
    const other = { transport: session, callTool: () => Promise.reject(new StreamableHTTPError(500, 'boom')) };
    const e = await callMcpTool(pool(other).p, target(), {}, opts()).catch((err: unknown) => err);
    expect((e as DomainError).code).toBe('unavailable');
  });

  it('calls a task-required tool as a task, reports its statuses, and cancels it when the call is abandoned', async () => {
    const progress: ToolProgress[] = [];
    const task = (status: string) => ({ taskId: 'task-1', status, statusMessage: `${status}…` });
    const done = {
      transport: session,
      experimental: {
        tasks: {
          *callToolStream(_p: unknown, _s: unknown, o: { task?: object }) {
            expect(o.task).toEqual({});
            yield { type: 'taskCreated', task: task('working') };
            yield { type: 'taskStatus', task: task('completed') };
            yield { type: 'result', result: answer };
          },
        },
      },
    };
    const required = target({ task_support: 'required' });
    expect(await callMcpTool(pool(done).p, required, {}, opts(undefined, progress))).toMatchObject({
      content: answer.content,
    });
    expect(progress).toEqual([
      { task_status: 'working', message: 'working…' },
      { task_status: 'completed', message: 'completed…' },
    ]);

    const cancelled: string[] = [];
    const ctl = new AbortController();
    const hanging = {
      transport: session,
      experimental: {
        tasks: {
          cancelTask: (id: string) => (cancelled.push(id), Promise.resolve({})),
          *callToolStream() {
            yield { type: 'taskCreated', task: task('working') };
            ctl.abort();
            yield { type: 'error', error: new Error('aborted') };
          },
        },
      },
    };
    await expect(callMcpTool(pool(hanging).p, required, {}, opts(ctl.signal))).rejects.toThrow('aborted');
    expect(cancelled).toEqual(['task-1']);
  });
});
