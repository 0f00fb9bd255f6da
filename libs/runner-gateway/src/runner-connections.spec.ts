import type { RunnerResult } from '@libs/protocol';
import { InboundEvents, RunnerConnections, type InboundEvent, type RunnerSession } from './runner-connections';

const session = { session_id: 's1', plugin_id: 'acme/bot', runners: [] } as unknown as RunnerSession;
const result = (sequence: number) => ({ run_id: 'r1', type: 'message.delta', sequence }) as RunnerResult;
const seq = (e: InboundEvent) => (e.kind === 'result' ? e.result.sequence : e.kind);

describe('InboundEvents: results and disconnects as plain calls', () => {
  it('tells every listener of every event, in order, until it unsubscribes', () => {
    const events = new InboundEvents();
    const a: unknown[] = [];
    const b: unknown[] = [];
    const subA = events.subscribe((e) => a.push(seq(e)));
    events.subscribe((e) => b.push(seq(e)));
    events.next({ kind: 'result', session, result: result(1) });
    subA.unsubscribe();
    events.next({ kind: 'result', session, result: result(2) });
    expect(a).toEqual([1]);
    expect(b).toEqual([1, 2]);
  });

  it('a listener that throws is logged; the others and the caller carry on', () => {
    const events = new InboundEvents();
    const heard: unknown[] = [];
    events.subscribe(() => {
      throw new Error('boom');
    });
    events.subscribe((e) => heard.push(seq(e)));
    expect(() => events.next({ kind: 'result', session, result: result(1) })).not.toThrow();
    expect(heard).toEqual([1]);
  });

  it('RunnerConnections.deliver hands the result to inbound$ listeners', () => {
    const connections = new RunnerConnections();
    const heard: InboundEvent[] = [];
    connections.inbound$.subscribe((e) => heard.push(e));
    connections.deliver(session, result(7));
    expect(heard).toEqual([{ kind: 'result', session, result: result(7) }]);
  });
});
