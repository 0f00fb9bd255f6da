import type { AppConfig } from '@libs/config';
import type { GrantedTool } from '@libs/authz';
import { DomainError } from '@libs/protocol';
import type { BuiltinTool } from './builtin-tools';
import type { McpClientPool } from './mcp-client-pool';
import type { ToolRegistryService } from './tool-registry.service';
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

  it('returns the result as plain JSON, or payload_too_large over the cap', async () => {
    expect(await service().call(runCall(), granted, { size: 3 })).toEqual({
      is_error: false,
      content: [{ type: 'text', text: 'zzz' }],
    });
    expect(await error(service().call(runCall(), granted, { size: 2000 }))).toEqual({ code: 'payload_too_large' });
  });

  it('times out, is bounded by the run deadline, and stops when the run ends', async () => {
    expect(await error(service(50).call(runCall(), granted, { ms: 5_000 }))).toEqual({
      code: 'deadline_exceeded',
      reason: 'timeout',
    });
    expect(await error(service().call(runCall(Date.now() + 50), granted, { ms: 5_000 }))).toEqual({
      code: 'deadline_exceeded',
      reason: 'deadline',
    });
    expect(await error(service().call(runCall(Date.now() - 1), granted, {}))).toEqual({ code: 'deadline_exceeded' });
    const run = new AbortController();
    setTimeout(() => run.abort(), 50);
    expect(await error(service().call(runCall(null, run.signal), granted, { ms: 5_000 }))).toEqual({
      code: 'deadline_exceeded',
      reason: 'run_ended',
    });
  });
});
