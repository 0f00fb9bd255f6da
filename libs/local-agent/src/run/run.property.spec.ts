import fc from 'fast-check';
import type { JsonObject } from '../host-port';
import { call, FakeHost, fakeContext, hostError, streaming, withApis, type ScriptedTurn } from '../testing/fake-host';
import { runAgent } from '../testing/run-agent';

/*
 * Run invariants over random model/tool behaviour: exactly one terminal result and it is the last;
 * every tool.call.completed follows its tool.call.started; a completed run completed every tool
 * call it started; at most one message.completed, right before run.completed.
 */

const TOOLS = ['ok', 'boom', 'stop', 'reported', 'ghost'] as const;

const toolCall = fc.record({
  name: fc.constantFrom(...TOOLS),
  badArgs: fc.boolean(),
});

let ids = 0;
const turn: fc.Arbitrary<ScriptedTurn> = fc.oneof(
  fc.string({ maxLength: 20 }).map((text) => ({ text, usage: { total_tokens: 3 } })),
  fc.array(toolCall, { minLength: 1, maxLength: 3 }).map((calls) => ({
    tool_calls: calls.map((c) => call(`t${++ids}`, c.name, c.badArgs ? '{x' : {})),
  })),
  fc.constant<ScriptedTurn>({ error: new Error('provider down') }),
  fc.constant<ScriptedTurn>({ error: new Error('context length exceeded') }),
  fc.constant<ScriptedTurn>({ stream: [{ delta: 'partial' }], errorAfter: new Error('reset') }),
);

const scenario = fc.record({
  m1: fc.array(turn, { maxLength: 6 }),
  m2: fc.array(turn, { maxLength: 6 }),
  stream: fc.boolean(),
  steering: fc.array(fc.array(fc.string({ minLength: 1, maxLength: 10 }), { maxLength: 2 }), { maxLength: 4 }),
  iterations: fc.integer({ min: 1, max: 4 }),
  serial: fc.boolean(),
});

describe('run invariants (property)', () => {
  it('one terminal result, last; tool events paired; message.completed only right before run.completed', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const host = new FakeHost().script('m1', ...s.m1).script('m2', ...s.m2);
        host
          .tool('ok', () => 'fine')
          .tool('boom', () => Promise.reject(hostError('runtime_error', 'exploded')))
          .tool('stop', () => ({ done: true, terminate: true }))
          .tool('reported', () => ({ is_error: true, content: [{ type: 'text', text: 'bad input' }] }))
          .tool('ghost', () => 'never', false);
        host.steering = s.steering.map((texts) => texts.map((text) => ({ input: { text } })));
        const config: JsonObject = {
          'max-tool-iterations': s.iterations,
          'tool-execution-mode': s.serial ? 'serial' : 'parallel',
        };
        let ctx = fakeContext(
          {
            resources: {
              ...fakeContext().resources,
              tools: ['ok', 'boom', 'stop', 'reported'].map((tool_name) => ({ tool_name, parameters: {} })),
            },
          },
          config,
        );
        ctx = withApis(ctx, { steering_pull: true });
        await runAgent(host, s.stream ? streaming(ctx) : ctx);

        const types = host.typesOf();
        const terminals = types.filter((t) => t === 'run.completed' || t === 'run.failed');
        expect(terminals).toHaveLength(1);
        expect(['run.completed', 'run.failed']).toContain(types.at(-1));
        const started = new Set<string>();
        const completed = new Set<string>();
        for (const r of host.results) {
          if (r.type === 'tool.call.started') {
            started.add(r.data.tool_call_id);
          } else if (r.type === 'tool.call.completed') {
            expect(started.has(r.data.tool_call_id)).toBe(true);
            completed.add(r.data.tool_call_id);
          }
        }
        if (types.at(-1) === 'run.completed') {
          expect([...started].every((id) => completed.has(id))).toBe(true);
        }
        const mc = types.indexOf('message.completed');
        expect(types.filter((t) => t === 'message.completed').length).toBeLessThanOrEqual(1);
        if (mc >= 0) {
          expect(types[mc + 1]).toBe('run.completed');
        }
      }),
      { numRuns: 150 },
    );
  });
});
