import type { BenchStats } from '../../apps/demo-runner/src/host-api-bench';
import type { HostHttp } from '../common/http';
import { readSse } from '../common/sse';

/*
 * One run of an agent in the bench conversation: POST /v1/events, then the run's SSE stream to
 * its terminal result. `onResult` sees every result as it arrives (the bench samples the host's
 * CPU on `bench.measuring` and `bench.stats`).
 */

export const CONVERSATION = { conversation_id: 'bench-host-api' };
export const ACTOR = { actor_type: 'user', actor_id: 'bench-user' };

export interface RunOutcome {
  runId: string;
  types: string[];
  stats: BenchStats | null;
}

interface ResultJson {
  type: string;
  data: Record<string, unknown>;
}

export async function runOnce(
  http: HostHttp,
  agentId: string,
  text: string,
  timeoutMs: number,
  onResult: (type: string) => void = () => undefined,
): Promise<RunOutcome> {
  const body = (await http.expect(202, 'POST', '/v1/events', {
    agent_id: agentId,
    event: { event_type: 'message.received', source: 'api' },
    conversation: CONVERSATION,
    actor: ACTOR,
    input: { text },
  })) as { run_id?: string; disposition?: string };
  if (body.disposition !== 'started' || !body.run_id) {
    throw new Error(`POST /v1/events (${agentId}): ${JSON.stringify(body)}`);
  }
  const runId = body.run_id;
  const types: string[] = [];
  let stats: BenchStats | null = null;
  let terminal: ResultJson | null = null;
  await readSse(
    http,
    `/v1/runs/${runId}/events`,
    (e) => {
      onResult(e.event);
      types.push(e.event);
      const result = JSON.parse(e.data) as ResultJson;
      if (e.event === 'bench.stats') {
        stats = result.data as unknown as BenchStats;
      } else if (e.event === 'run.completed' || e.event === 'run.failed') {
        terminal = result;
      }
    },
    timeoutMs,
  );
  const end = terminal as ResultJson | null;
  if (end?.type !== 'run.completed') {
    throw new Error(
      `run ${runId} (${agentId}): ${end ? `${end.type} ${JSON.stringify(end.data)}` : 'no terminal result'}; results: ${types.join(', ')}`,
    );
  }
  return { runId, types, stats };
}
