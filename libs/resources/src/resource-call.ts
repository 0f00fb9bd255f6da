import type { RunLease } from '@libs/persistence';

/** What a resource operation gets from the run it serves. */
export interface ResourceCall {
  run_id: string;
  /** Aborted when the run ends (terminal result, deadline, cancel): stop the provider call. */
  signal: AbortSignal;
  /** Epoch ms, or null for no deadline; per-call timeouts never outlive it. */
  deadline_at_ms: number | null;
  /** The run may ask a person (docs/interactions.md#who-may-ask): MCP servers may then elicit. */
  interactions?: boolean;
  /** The run's lease: the call's model-usage row is fenced by it (docs/scale-out.md#fenced-host-api-writes). */
  lease?: RunLease | null;
}
