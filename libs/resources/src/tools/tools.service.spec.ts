import type { AppConfig } from '@libs/config';
import type { GrantedTool } from '@libs/authz';
import { DomainError } from '@libs/protocol';
import type { BuiltinTool } from './builtin-tools';
import type { McpClientPool } from './mcp-client-pool';
import type { ToolRegistryService } from './tool-registry.service';
import type { ToolProgressEvent } from './tool-progress';
import { ToolsService } from './tools.service';

const granted: GrantedTool = {
  tool_name: 'wait',
  tool_type: 'builtin',
  description: '',
  operations: ['call'],
  parameters: null,
  source: 'builtin',
  source_id: null,
};

/** A service whose only tool is a built-in that waits for `ms` (or until aborted). */
function service(callTimeoutMs = 5_000, maxResultBytes = 1024) {
  const tool: BuiltinTool = {
    name: 'wait',
    description: '',
    parameters: { type: 'object', properties: { ms: { type: 'number' }, size: { type: 'number' } } },
    enabledByDefault: true,
    run: (args, ctx) =>
      new Promise((resolve) => {
        const t = setTimeout(
          () => resolve({ is_error: false, content: [{ type: 'text', text: 'z'.repeat(Number(args.size ?? 1)) }] }),
          Number(args.ms ?? 0),
        );
        ctx.signal.addEventListener('abort', () => clearTimeout(t));
      }),
  };
  const registry = { resolve: () => Promise.resolve({ kind: 'builtin', tool }) } as unknown as ToolRegistryService;
  const config = { tools: { callTimeoutMs, maxResultBytes } } as AppConfig;
  return new ToolsService(registry, {} as McpClientPool, config);
}

const runCall = (deadline: number | null = null, signal = new AbortController().signal) => ({
  run_id: 'r1',
  signal,
  deadline_at_ms: deadline,
});

async function error(p: Promise<unknown>): Promise<{ code: string; reason?: unknown }> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) {
      return { code: e.code, reason: e.details.reason };
    }
    throw e;
  }
  throw new Error('expected an error');
}

describe('ToolsService.call', () => {
  it('refuses parameters that are not an object', async () => {
    for (const bad of [null, [], 'x', 3]) {
      expect(await error(service().call(runCall(), granted, bad as never))).toEqual({ code: 'invalid_argument' });
    }
    expect(await error(service().call(runCall(), granted, { ms: 'soon' }))).toEqual({ code: 'invalid_argument' });
  });

  it('returns the result as plain JSON, cut to fit with a marker when over the cap', async () => {
    expect(await service().call(runCall(), granted, { size: 3 })).toEqual({
      is_error: false,
      content: [{ type: 'text', text: 'zzz' }],
    });
    const cut = (await service().call(runCall(), granted, { size: 2000 })) as any;
    expect(Buffer.byteLength(JSON.stringify(cut))).toBeLessThanOrEqual(1024);
    expect(cut).toMatchObject({ is_error: false, truncated: true, original_bytes: 2056 });
    expect(cut.content[0].text).toMatch(/^z+$/);
    expect(cut.content[1].text).toContain('[tool result truncated: 2056 bytes of JSON is over the 1024-byte limit');
  });

  it('times out, is bounded by the run deadline, and stops when the run ends', async () => {
    // Fake timers (Date.now included): the deadlines are exact, however loaded the machine is.
    jest.useFakeTimers();
    try {
      const timedOut = error(service(50).call(runCall(), granted, { ms: 5_000 }));
      await jest.advanceTimersByTimeAsync(50);
      expect(await timedOut).toEqual({ code: 'deadline_exceeded', reason: 'timeout' });

      const pastDeadline = error(service().call(runCall(Date.now() + 50), granted, { ms: 5_000 }));
      await jest.advanceTimersByTimeAsync(50);
      expect(await pastDeadline).toEqual({ code: 'deadline_exceeded', reason: 'deadline' });

      expect(await error(service().call(runCall(Date.now() - 1), granted, {}))).toEqual({ code: 'deadline_exceeded' });

      const run = new AbortController();
      const ended = error(service().call(runCall(null, run.signal), granted, { ms: 5_000 }));
      await jest.advanceTimersByTimeAsync(10);
      run.abort();
      expect(await ended).toEqual({ code: 'deadline_exceeded', reason: 'run_ended' });
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('ToolsService.call on an MCP tool that reports progress', () => {
  /** An MCP tool whose server reports `steps` progress notifications `everyMs` apart, then answers. */
  function mcpService(callTimeoutMs: number, steps: number, everyMs: number) {
    const client = {
      transport: undefined,
      callTool: (_p: unknown, _s: unknown, opts: { onprogress: (p: object) => void; signal: AbortSignal }) =>
        new Promise((resolve) => {
          let n = 0;
          const t = setInterval(() => {
            opts.onprogress({ progress: ++n, total: steps, message: `step ${n}` });
            if (n === steps) {
              clearInterval(t);
              resolve({ content: [{ type: 'text', text: 'done' }] });
            }
          }, everyMs);
          opts.signal.addEventListener('abort', () => clearInterval(t));
        }),
    };
    const row = { tool_name: 'long', source_tool_name: 'long', metadata: {} };
    const registry = {
      resolve: () => Promise.resolve({ kind: 'mcp', row, sourceId: 's', spec: { kind: 'mcp_stdio', config: {} } }),
    } as unknown as ToolRegistryService;
    const pool = {
      acquire: () => Promise.resolve({ client, fresh: false, release: () => undefined }),
    } as unknown as McpClientPool;
    const config = { tools: { callTimeoutMs, maxResultBytes: 4096 } } as AppConfig;
    return new ToolsService(registry, pool, config);
  }
  const mcpTool: GrantedTool = { ...granted, tool_name: 'long', tool_type: 'mcp', source: 'mcp', source_id: 's' };

  it('restarts the timeout on each report and forwards the reports', async () => {
    const svc = mcpService(300, 20, 20);
    const seen: ToolProgressEvent[] = [];
    svc.progress$.subscribe((e) => seen.push(e));
    // 20 reports 20 ms apart: longer in all than the 300 ms timeout, never 300 ms without one.
    expect(await svc.call(runCall(), mcpTool, {})).toEqual({
      is_error: false,
      content: [{ type: 'text', text: 'done' }],
    });
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.at(-1)).toMatchObject({ run_id: 'r1', tool_name: 'long', progress: 20, total: 20, message: 'step 20' });
    expect(new Set(seen.map((e) => e.call_id)).size).toBe(1);
  });

  it('still ends at the run deadline however often the tool reports', async () => {
    const svc = mcpService(300, 1000, 20);
    expect(await error(svc.call(runCall(Date.now() + 150), mcpTool, {}))).toEqual({
      code: 'deadline_exceeded',
      reason: 'deadline',
    });
  });
});
