import { ADMIN_KEY, launchDemoRunner, waitFor, type Host, type Proc } from './harness';

// Helpers of the steering e2e suites: a demo runner that declares steering, conversation events,
// and the answers of a conversation read back from its runs' result streams.

/** Starts the demo runner, declaring steering, with a token it already has (a plugin registered on an earlier host). */
export function launchRunner(host: Host, token: string, env: Record<string, string> = {}): Proc {
  return launchDemoRunner(host, token, { env: { DEMO_STEERING: '1', ...env } });
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
