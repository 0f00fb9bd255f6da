import { setTimeout as sleep } from 'node:timers/promises';
import { defineRunner } from './runner';
import { FakeHost, protocolFaults } from './testing';

/* The protocol fault hooks (faults.ts): what a misbehaving test runner can send, and nothing more. */

describe('protocol fault hooks', () => {
  it('sendRaw writes sequences as given (duplicates, gaps, none) in order with the run’s other results', async () => {
    const runner = defineRunner({
      name: 'default',
      async run(_ctx, io) {
        const faults = protocolFaults(io);
        await faults.sendRaw({ type: 'message.delta', data: { n: 1 }, sequence: 1 });
        await faults.sendRaw({ type: 'message.delta', data: { n: 2 }, sequence: 1 });
        await faults.sendRaw({ type: 'message.delta', data: { n: 3 }, sequence: 3 });
        await faults.sendRaw({ type: 'message.delta', data: { n: 4 }, sequence: null });
        await faults.sendRaw({ type: 'run.completed', data: { finish_reason: 'stop' }, usage: { total_tokens: 2 } });
      },
    });
    const outcome = await new FakeHost({ runners: [runner] }).run();
    expect(outcome.status).toBe('completed');
    expect(outcome.results.map((r) => [r.type, r.sequence])).toEqual([
      ['message.delta', 1],
      ['message.delta', 1],
      ['message.delta', 3],
      ['message.delta', undefined],
      ['run.completed', undefined],
    ]);
    expect(outcome.results[4].usage).toEqual({ total_tokens: 2 });
    expect(outcome.results[3]).not.toHaveProperty('sequence');
  });

  it('a raw terminal result ends the run: its emitters and the dispatcher send nothing more', async () => {
    const runner = defineRunner({
      name: 'default',
      async run(_ctx, io) {
        await protocolFaults(io).sendRaw({ type: 'run.failed', data: { error: 'raw', code: 'runner.error' } });
        await io.delta('dropped');
        await io.completed();
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const run = host.start();
    const outcome = await run.done;
    await sleep(5);
    expect(outcome).toMatchObject({ status: 'failed', code: 'runner.error' });
    expect(run.results.map((r) => r.type)).toEqual(['run.failed']);
  });

  it('sendRaw may follow the terminal result', async () => {
    const runner = defineRunner({
      name: 'default',
      async run(_ctx, io) {
        await io.completed();
        await protocolFaults(io).sendRaw({ type: 'message.delta', data: { late: true } });
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const run = host.start();
    await run.done;
    await sleep(5);
    expect(run.results.map((r) => [r.type, r.sequence])).toEqual([
      ['run.completed', 1],
      ['message.delta', undefined],
    ]);
  });

  it('ignoreCancel: cancel and the deadline leave the run running and send nothing', async () => {
    let resume!: () => void;
    const resumed = new Promise<void>((r) => (resume = r));
    let aborted = false;
    const runner = defineRunner({
      name: 'default',
      async run(_ctx, io) {
        protocolFaults(io).ignoreCancel();
        io.signal.addEventListener('abort', () => (aborted = true));
        await io.delta('a');
        await resumed;
        await io.delta('b');
      },
    });
    const host = new FakeHost({ runners: [runner] });
    const run = host.start({ deadlineMs: 10 });
    await run.waitFor('message.delta');
    host.cancel(run.runId, 'stop');
    await sleep(30); // past the deadline too
    expect(run.ended).toBe(false);
    expect(aborted).toBe(false);
    resume();
    const outcome = await run.done;
    expect(outcome.status).toBe('completed');
    expect(outcome.streamed).toBe('ab');
  });

  it('refuses an object that is not the io of a run', () => {
    expect(() => protocolFaults({})).toThrow('not the io of a run started by the SDK');
  });
});
