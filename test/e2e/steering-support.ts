import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { ADMIN_KEY, waitFor, type Host, type Proc } from './harness';

// Helpers of the steering e2e suites: a demo runner that declares steering, conversation events,
// and the answers of a conversation read back from its runs' result streams.

const RUNNER_MAIN = path.resolve(__dirname, '..', '..', 'dist/apps/demo-runner/src/main.js');

/** Starts the demo runner with a token it already has (a plugin registered on an earlier host). */
export function launchRunner(host: Host, token: string, env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, [RUNNER_MAIN], {
    env: {
      ...process.env,
      RUNNERHOST_GRPC_URL: host.grpc,
      RUNNERHOST_PLUGIN_TOKEN: token,
      RUNNERHOST_PLUGIN_AUTHOR: 'demo',
      RUNNERHOST_PLUGIN_NAME: 'echo',
      DEMO_STEERING: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: string[] = [];
  child.stdout.on('data', (d: Buffer) => chunks.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => chunks.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    logs: () => chunks.join(''),
    stop: async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
      }
      return exited;
    },
  };
}

export async function runnerConnected(host: Host, runnerId = 'plugin:demo/echo/default'): Promise<void> {
  await waitFor('runner connected', async () => {
    const r = await host.api<any[]>('GET', '/v1/admin/runners');
    return r.body.find((x) => x.runner_id === runnerId && x.state === 'connected');
  });
}

export function message(agentId: string, conversationId: string, text: string, extra: Record<string, unknown> = {}) {
  return {
    agent_id: agentId,
    event: { event_type: 'message.received', source: 'api' },
    conversation: { conversation_id: conversationId },
    actor: { actor_type: 'user', actor_id: 'u1' },
    input: { text },
    ...extra,
  };
}

export interface RunSummary {
  run_id: string;
  status: string;
  event_id: string;
  started_at: string | null;
  /** The contents of the run's message.completed results, in order. */
  answers: string[];
}

/** Every run of the conversation, once none is queued or running, in start order, with its answers. */
export async function conversationRuns(host: Host, conversationId: string, timeoutMs = 30_000): Promise<RunSummary[]> {
  const runs = await waitFor(
    `conversation ${conversationId} settled`,
    async () => {
      const r = await host.api<{ items: any[] }>('GET', `/v1/runs?conversation_id=${conversationId}&limit=100`);
      return r.body.items.length > 0 && r.body.items.every((x) => !['queued', 'running'].includes(x.status))
        ? r.body.items
        : null;
    },
    timeoutMs,
  );
  const out: RunSummary[] = [];
  for (const run of runs) {
    const events = await host.sse(run.run_id);
    out.push({
      run_id: run.run_id,
      status: run.status,
      event_id: run.event_id,
      started_at: run.started_at,
      answers: events
        .filter((e) => e.data.type === 'message.completed')
        .map((e) => String(e.data.data.message.content)),
    });
  }
  // Runs of one conversation never overlap: start order is a total order (ties: creation order).
  return out.reverse().sort((a, b) => (a.started_at ?? '').localeCompare(b.started_at ?? ''));
}

/** Every answer of the conversation in order, and how often each text was answered. */
export function answered(runs: RunSummary[]): { order: string[]; counts: Map<string, number> } {
  const order = runs.flatMap((r) => r.answers);
  const counts = new Map<string, number>();
  for (const a of order) {
    counts.set(a, (counts.get(a) ?? 0) + 1);
  }
  return { order, counts };
}

export async function admin<T = any>(host: Host, p: string): Promise<T> {
  const r = await host.api<T>('GET', p, undefined, ADMIN_KEY);
  expect(r.status).toBe(200);
  return r.body;
}
