import { testSnapshot } from './testing/snapshot';
import type { AppConfig } from '@libs/config';
import { RunnerConnections, type RunnerSession } from '@libs/runner-gateway';
import { ActiveRun, type RunEnding } from './active-run';
import { ActiveRuns } from './active-runs';
import type { InteractionsService } from './interactions/interactions.service';
import { ResultIngestService } from './result-ingest.service';
import type { RunLifecycleService } from './run-lifecycle.service';
import type { HostVerdict } from './run-outcome';
import type { ResultView } from './run-stream.bus';

type Incoming = Parameters<ResultIngestService['accept']>[1];

const MAX_RESULT_BYTES = 200;
const MAX_MESSAGE_BYTES = 10;

function session(id: string): RunnerSession & { sent: unknown[] } {
  const sent: unknown[] = [];
  return {
    session_id: id,
    plugin_id: 'x/y',
    connected_at: 0,
    last_seen_at: 0,
    runners: [],
    send: (m) => void sent.push(m),
    close: () => undefined,
    sent,
  };
}

/** The lifecycle port as the ingest sees it: accepted results and verdicts, recorded; a verdict goes to the run. */
class FakeLifecycle {
  readonly accepted: ResultView[] = [];
  readonly verdicts: HostVerdict[] = [];
  readonly disconnected: string[] = [];
  accept(_run: ActiveRun, row: ResultView): void {
    this.accepted.push(row);
  }
  conclude(run: ActiveRun, verdict: HostVerdict): void {
    this.verdicts.push(verdict);
    run.fail(verdict);
  }
  onDisconnected(s: RunnerSession, reason: string): void {
    this.disconnected.push(`${s.session_id}: ${reason}`);
  }
}

function setup(opts: { interactions?: Partial<InteractionsService> } = {}) {
  const connections = new RunnerConnections();
  const active = new ActiveRuns();
  const lifecycle = new FakeLifecycle();
  const ends: RunEnding[] = [];
  const s1 = session('s1');
  const run = new ActiveRun(
    {
      run_id: 'r1',
      agent_id: 'a',
      session: s1,
      snapshot: testSnapshot(),
    },
    { cancelGraceMs: 1000, onEnd: (e) => ends.push(e) },
  );
  active.add(run);
  const interactions = (opts.interactions ?? {
    onAction: () => ({ ops: [], written: null, refused: null }),
  }) as InteractionsService;
  const config = { runs: { maxResultBytes: MAX_RESULT_BYTES, maxMessageBytes: MAX_MESSAGE_BYTES } } as AppConfig;
  const ingest = new ResultIngestService(
    connections,
    active,
    lifecycle as unknown as RunLifecycleService,
    interactions,
    config,
  );
  const send = (r: Partial<Incoming> & { type: string }, from = s1) =>
    ingest.accept(from, { run_id: 'r1', data: {}, ...r });
  return { ingest, connections, run, lifecycle, ends, s1, send };
}

describe('ResultIngestService: the result rules at the runner edge (docs/protocol.md#result-rules)', () => {
  it('hands a valid result to the run, and the accepted row to the lifecycle', () => {
    const { send, lifecycle, run } = setup();
    send({ type: 'message.delta', sequence: 1, data: { chunk: { content: 'Hi' } }, timestamp: 1_700_000_000 });
    expect(lifecycle.accepted).toEqual([
      {
        run_id: 'r1',
        sequence: 1,
        type: 'message.delta',
        data: { chunk: { role: 'assistant', content: 'Hi' } },
        usage: null,
        source: 'runner',
        timestamp: 1_700_000_000,
      },
    ]);
    expect(run.streamed).toBe('Hi');
  });

  it('drops results of a run that is not active on the sending session', () => {
    const { send, lifecycle, run, ends } = setup();
    send({ type: 'run.completed', sequence: 1 }, session('other'));
    send({ type: 'run.completed', sequence: 1, run_id: 'nope' });
    expect(lifecycle.accepted).toEqual([]);
    expect(ends).toEqual([]);
    expect(run.phase).toBe('running');
  });

  it('a terminal result ends the run through its state machine, never as an accepted result', () => {
    const { send, lifecycle, ends, run } = setup();
    send({ type: 'run.completed', sequence: 1, data: { finish_reason: 'stop' } });
    expect(lifecycle.accepted).toEqual([]);
    expect(ends).toEqual([
      expect.objectContaining({ cause: 'result', outcome: expect.objectContaining({ status: 'completed' }) }),
    ]);
    send({ type: 'message.delta', sequence: 2, data: { chunk: { content: 'late' } } });
    expect(lifecycle.accepted).toEqual([]);
    expect(run.last_sequence).toBe(1);
  });

  it('an invalid result is dropped and the run goes on; an invalid terminal result fails the run runner.invalid_result', () => {
    const { send, lifecycle, ends } = setup();
    send({ type: 'tool.call.started', sequence: 1, data: { tool_name: '' } });
    expect(lifecycle.accepted).toEqual([]);
    expect(ends).toEqual([]);
    send({ type: 'run.failed', sequence: 2, data: { code: 'x' } }); // error is required
    expect(lifecycle.verdicts).toEqual([
      expect.objectContaining({ status: 'failed', code: 'runner.invalid_result', retryable: false }),
    ]);
    expect(ends).toHaveLength(1);
  });

  it('refuses data over MAX_RESULT_BYTES', () => {
    const { send, lifecycle } = setup();
    send({ type: 'artifact.created', sequence: 1, data: { blob: 'x'.repeat(MAX_RESULT_BYTES) } });
    expect(lifecycle.accepted).toEqual([]);
    send({ type: 'run.completed', sequence: 2, data: { finish_reason: 'x'.repeat(MAX_RESULT_BYTES) } });
    expect(lifecycle.verdicts[0].error).toMatch(/data is \d+ bytes, limit 200/);
  });

  it('a delta that takes the message past MAX_MESSAGE_BYTES is dropped, the runner told to stop, the run failed', () => {
    const { send, lifecycle, s1 } = setup();
    send({ type: 'message.delta', sequence: 1, data: { chunk: { content: '12345' } } });
    send({ type: 'message.delta', sequence: 2, data: { chunk: { content: '67890' } } }); // exactly the bound
    send({ type: 'message.delta', sequence: 3, data: { chunk: { content: 'x' } } });
    expect(lifecycle.accepted.map((r) => r.sequence)).toEqual([1, 2]);
    expect(s1.sent).toEqual([{ cancel: { run_id: 'r1', reason: 'message too large' } }]);
    expect(lifecycle.verdicts).toEqual([
      expect.objectContaining({ status: 'failed', code: 'runner.message_too_large', retryable: false }),
    ]);
  });

  it('drops a duplicate sequence; keeps invalid usage and timestamps out of the row', () => {
    const { send, lifecycle } = setup();
    send({ type: 'tool.call.started', sequence: 1, data: { tool_call_id: 'c', tool_name: 't' } });
    send({ type: 'tool.call.started', sequence: 1, data: { tool_call_id: 'c', tool_name: 't' } });
    send({
      type: 'tool.call.started',
      sequence: 2,
      data: { tool_call_id: 'd', tool_name: 't' },
      usage: { prompt_tokens: -1 },
      timestamp: 2 ** 60,
    });
    expect(lifecycle.accepted.map((r) => [r.sequence, r.usage, r.timestamp])).toEqual([
      [1, null, null],
      [2, null, null],
    ]);
  });

  it('an action.requested the interaction rules refuse is written, then fails the run runner.protocol_error', () => {
    const { send, lifecycle, ends } = setup({
      interactions: { onAction: () => ({ ops: [], written: null, refused: 'interaction.requested: not allowed' }) },
    });
    send({ type: 'action.requested', sequence: 1, data: { action: 'interaction.requested' } });
    expect(lifecycle.accepted.map((r) => r.type)).toEqual(['action.requested']);
    expect(lifecycle.verdicts).toEqual([
      expect.objectContaining({ code: 'runner.protocol_error', error: 'interaction.requested: not allowed' }),
    ]);
    expect(ends).toEqual([
      expect.objectContaining({ cause: 'host', terminal: expect.objectContaining({ sequence: 2 }) }),
    ]);
  });

  it('takes results and disconnects from the runner connections', () => {
    const { ingest, connections, lifecycle, s1 } = setup();
    ingest.onModuleInit();
    connections.deliver(s1, {
      run_id: 'r1',
      type: 'tool.call.started',
      sequence: 1,
      data: { tool_call_id: 'c', tool_name: 't' },
    });
    connections.inbound$.next({ kind: 'disconnected', session: s1, reason: 'gone' });
    ingest.onModuleDestroy();
    connections.deliver(s1, {
      run_id: 'r1',
      type: 'tool.call.started',
      sequence: 2,
      data: { tool_call_id: 'c', tool_name: 't' },
    });
    expect(lifecycle.accepted.map((r) => r.sequence)).toEqual([1]);
    expect(lifecycle.disconnected).toEqual(['s1: gone']);
  });
});
