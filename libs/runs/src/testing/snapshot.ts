import { buildSnapshot } from '@libs/authz';

/** What a spec varies in a run's snapshot; the rest is the smallest valid snapshot of a plugin run. */
export interface TestSnapshotOptions {
  run_id?: string;
  deadline?: number | null;
  conversation_id?: string | null;
  workspace_id?: string | null;
  burst?: number;
}

/** A frozen snapshot for the run specs of this lib (no grants, limits of 1). */
export function testSnapshot(o: TestSnapshotOptions = {}) {
  return buildSnapshot({
    run_id: o.run_id ?? 'r1',
    scope: {
      agent_id: 'a',
      runner_id: 'plugin:x/y/default',
      plugin_id: 'x/y',
      conversation_id: o.conversation_id ?? null,
      thread_id: null,
      bot_id: null,
      workspace_id: o.workspace_id ?? null,
      actor_type: null,
      actor_id: null,
      subject_type: null,
      subject_id: null,
    },
    manifest: { capabilities: {}, permissions: {} },
    policy: { resource: {}, state: {} },
    catalog: { models: [], tools: [], knowledge_bases: [] },
    limits: {
      max_payload_bytes: 1,
      max_state_value_bytes: 1,
      max_storage_value_bytes: 1,
      calls_per_second: 1,
      burst: o.burst ?? 1,
    },
    deadline_at_ms: o.deadline ?? null,
  });
}
