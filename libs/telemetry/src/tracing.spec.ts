import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Tracing } from './tracing';

/*
 * The span rules of docs/observability.md#traces that live in Tracing: result batches (one span
 * per group of results committed together), local-agent turns as the parent of the calls made
 * inside them, and the links of a steered follow-up.
 */

describe('Tracing', () => {
  const exporter = new InMemorySpanExporter();
  const tracing = new Tracing();
  beforeAll(() => tracing.start({ instance: 'unit', exporter }));
  afterAll(() => tracing.shutdown());
  beforeEach(() => exporter.reset());

  const named = (name: string): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.name === name);
  const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

  it('does nothing while off', async () => {
    const off = new Tracing();
    off.runStarted('r0', {});
    off.resultAccepted('r0', 1, true);
    off.resultsCommitted('r0', 1);
    expect(await off.agentTurn('r0', 1, (note) => (note({ toolCalls: 1 }), Promise.resolve(7)))).toBe(7);
    expect(off.activeTraceparent()).toBeNull();
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it('spans the results accepted before their commit as one batch; the terminal batch names the status', () => {
    tracing.runStarted('r1', {});
    tracing.resultAccepted('r1', 1, true);
    tracing.resultAccepted('r1', 2, true);
    tracing.resultAccepted('r1', 3, false);
    tracing.resultsCommitted('r1', 1); // the commit of an earlier result: the batch stays open
    expect(named('result batch')).toEqual([]);
    tracing.resultsCommitted('r1', 3);
    tracing.resultAccepted('r1', 4, false);
    tracing.runEnded('r1', 'completed', null);
    const [run] = named('run');
    const batches = named('result batch');
    expect(batches.map((b) => b.attributes)).toEqual([
      {
        'runnerhost.run_id': 'r1',
        'runnerhost.results.count': 3,
        'runnerhost.results.deltas': 2,
        'runnerhost.results.first_sequence': 1,
        'runnerhost.results.last_sequence': 3,
      },
      {
        'runnerhost.run_id': 'r1',
        'runnerhost.results.count': 1,
        'runnerhost.results.deltas': 0,
        'runnerhost.results.first_sequence': 4,
        'runnerhost.results.last_sequence': 4,
        'runnerhost.run.status': 'completed',
      },
    ]);
    expect(batches.map(parentOf)).toEqual([run.spanContext().spanId, run.spanContext().spanId]);
    // Results of a run without a span (traces started after it) are ignored.
    tracing.resultAccepted('unknown', 1, true);
    tracing.resultsCommitted('unknown', 1);
    expect(named('result batch')).toHaveLength(2);
  });

  it('makes a local-agent turn the parent of the host-API, model and tool calls made in it', async () => {
    tracing.runStarted('r2', {});
    await tracing.agentTurn('r2', 1, async (note) => {
      await tracing.hostApiCall('r2', 'model.stream', () =>
        Promise.resolve(tracing.modelCall('r2', 'm1', 'stream', performance.now(), false, 10, 2)),
      );
      tracing.toolCall('r2', 'add', 'mcp', performance.now(), false); // after its call returned
      expect(tracing.activeRunId()).toBe('r2'); // log lines inside the turn name the run
      note({ model: 'm1', inputTokens: 10, outputTokens: 2, toolCalls: 1 });
    });
    await expect(tracing.agentTurn('r2', 2, () => Promise.reject(new Error('model failed')))).rejects.toThrow();
    tracing.runEnded('r2', 'failed', 'runner.llm_error');
    expect(tracing.activeRunId()).toBeNull();
    const [turn, failedTurn] = named('agent turn');
    const [call] = named('host_api model.stream');
    expect(turn.attributes).toEqual({
      'runnerhost.run_id': 'r2',
      'runnerhost.local_agent.turn': 1,
      'gen_ai.request.model': 'm1',
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 2,
      'runnerhost.local_agent.tool_calls': 1,
    });
    expect(failedTurn.status.code).toBe(2); // ERROR
    expect(parentOf(turn)).toBe(named('run')[0].spanContext().spanId);
    expect(parentOf(call)).toBe(turn.spanContext().spanId);
    expect(parentOf(named('chat m1')[0])).toBe(call.spanContext().spanId);
    expect(parentOf(named('execute_tool add')[0])).toBe(turn.spanContext().spanId);
  });

  it("links a steered follow-up's admission to the run, and the pull to the follow-up", async () => {
    tracing.runStarted('r3', {});
    let itemTraceparent: string | null = null;
    await tracing.inSpan('admission', {}, () => {
      itemTraceparent = tracing.activeTraceparent();
      return Promise.resolve(tracing.steeredInto('r3'));
    });
    await tracing.hostApiCall('r3', 'steering.pull', () =>
      Promise.resolve(tracing.linkSteeringItems([{ traceparent: itemTraceparent }, { traceparent: 'garbage' }, {}])),
    );
    tracing.runEnded('r3', 'completed', null);
    const [admission] = named('admission');
    const [run] = named('run');
    const [pull] = named('host_api steering.pull');
    expect(itemTraceparent).toBe(`00-${admission.spanContext().traceId}-${admission.spanContext().spanId}-01`);
    expect(admission.links.map((l) => [l.context.spanId, l.attributes])).toEqual([
      [run.spanContext().spanId, { 'runnerhost.link': 'steered_into_run' }],
    ]);
    expect(admission.attributes['runnerhost.run_id']).toBe('r3');
    expect(run.events.map((e) => e.name)).toContain('steered follow-up');
    expect(pull.links.map((l) => l.context.spanId)).toEqual([admission.spanContext().spanId]);
  });
});
