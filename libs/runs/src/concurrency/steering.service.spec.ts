import type { SteeringRepository, SteeringRow } from '@libs/persistence';
import { hostApiRequest } from '@libs/protocol';
import type { RunGrant } from '../run-grant';
import { InProcessSignals } from './signal-port';
import { SteeringService } from './steering.service';

function fakeRun(deadline: number | null = null, ended = new AbortController()) {
  return {
    run_id: 'run-1',
    signal: ended.signal,
    snapshot: { deadline_at_ms: deadline },
  } as unknown as Pick<RunGrant, 'run_id' | 'snapshot' | 'signal'>;
}

/** What the host-API action table hands the service (the one parse of steering.pull). */
const parsed = (req: Record<string, unknown>) => hostApiRequest('steering.pull', req);

/** A steering item as admission stores it (libs/runs/src/concurrency/admission-rows.ts). */
const stored = (n: number) => ({
  item_id: `e${n}`,
  claimed_run_id: 'run-1',
  runner_id: 'plugin:acme/echo/default',
  claimed_at: 1_700_000_000,
  position: n,
  event: { event_id: `e${n}`, event_type: 'message.received', source: 'api', data: {} },
  conversation: { conversation_id: 'c' },
  actor: null,
  subject: null,
  input: { text: `follow-up ${n}` },
});

function item(n: number): SteeringRow {
  return { id: n, item: stored(n) } as unknown as SteeringRow;
}

function service(queue: SteeringRow[][]) {
  const calls: [string, number, string][] = [];
  const repo = {
    pull: (runId: string, limit: number, mode: string) => {
      calls.push([runId, limit, mode]);
      return Promise.resolve(queue.shift() ?? []);
    },
  } as unknown as SteeringRepository;
  const signals = new InProcessSignals();
  return { svc: new SteeringService(repo, signals), calls, signals };
}

describe('SteeringService.pull', () => {
  // Refusals (mode, limit, wait_ms) are the steering.pull request schema's, parsed once by the
  // host-API action table before the service runs: libs/protocol/src/host-api.spec.ts.
  it.each([
    [{}, 100, 'all'],
    [{ mode: 'ALL', limit: 7 }, 7, 'all'],
    [{ limit: 100 }, 100, 'all'],
    [{ limit: 101 }, 100, 'all'],
    [{ limit: 1000 }, 100, 'all'],
    [{ mode: 'one', limit: 50 }, 1, 'one'],
    [{ mode: 'One-At-A-Time' }, 1, 'one'],
    [{ mode: 'one_at_a_time' }, 1, 'one'],
  ])('%j (as the action table parses it) pulls up to %d items in mode %s', async (req, limit, mode) => {
    const { svc, calls } = service([[item(1)]]);
    await expect(svc.pull(fakeRun(), parsed(req))).resolves.toEqual([stored(1)]);
    expect(calls).toEqual([['run-1', limit, mode]]);
  });

  it('answers an empty queue at once without wait_ms', async () => {
    const { svc, calls } = service([]);
    await expect(svc.pull(fakeRun(), parsed({}))).resolves.toEqual([]);
    expect(calls).toHaveLength(1);
  });

  it('hands out the items typed as the protocol SteeringItem, refusing a broken stored one by name', async () => {
    const { svc } = service([[item(1), { id: 2, item: { ...stored(2), input: null } } as unknown as SteeringRow]]);
    await expect(svc.pull(fakeRun(), parsed({}))).rejects.toThrow('stored steering item 1: input is not an object');
  });

  it('with wait_ms, pulls again when an item is queued on the run', async () => {
    const { svc, calls, signals } = service([[], [item(2)]]);
    const pulled = svc.pull(fakeRun(), parsed({ wait_ms: 10_000 }));
    await new Promise((r) => setImmediate(r));
    signals.publish({ kind: 'steering', run_id: 'other-run' });
    signals.publish({ kind: 'steering', run_id: 'run-1' });
    await expect(pulled).resolves.toEqual([stored(2)]);
    expect(calls).toHaveLength(2);
  });

  it('stops waiting when the run ends (abort) or its deadline has passed', async () => {
    const { svc } = service([]);
    const ended = new AbortController();
    const pulled = svc.pull(fakeRun(null, ended), parsed({ wait_ms: 10_000 }));
    await new Promise((r) => setImmediate(r));
    ended.abort();
    await expect(pulled).resolves.toEqual([]);

    const late = service([]);
    await expect(late.svc.pull(fakeRun(Date.now() - 1), parsed({ wait_ms: 10_000 }))).resolves.toEqual([]);
  });
});
