import type { AgentRunContext } from '../host-port';
import { runLocalAgent } from '../run-local-agent';
import type { FakeHost } from './fake-host';

export const FIXED_NOW = new Date('2026-12-01T06:00:00Z');

/** Runs the agent against the fake with a frozen clock (so delta cadence is deterministic). */
export async function runAgent(host: FakeHost, ctx: AgentRunContext, warnings: string[] = []): Promise<FakeHost> {
  await runLocalAgent(host, ctx, ctx.config ?? {}, { now: () => FIXED_NOW, warn: (m) => warnings.push(m) });
  return host;
}

export const terminal = (host: FakeHost) =>
  host.results.filter((r) => r.type === 'run.completed' || r.type === 'run.failed');
