import type { AgentRunContext, JsonObject, LocalAgentHostPort } from './host-port';

/**
 * Runs the local agent for one run: reads the context, calls the host only through `port`, and
 * emits its results (exactly one terminal result) through `port.emit`. Resolves when the run has
 * ended; never rejects. `config` defaults to `context.config`.
 */
export async function runLocalAgent(
  port: LocalAgentHostPort,
  context: AgentRunContext,
  config: JsonObject = context.config ?? {},
): Promise<void> {
  void config;
  await port.emit({
    type: 'run.failed',
    data: { error: `local agent not implemented yet (run ${context.run_id})`, code: 'runner.error', retryable: false },
  });
}
