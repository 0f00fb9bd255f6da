import { Subject } from 'rxjs';
import type { RunsRepository } from '@libs/persistence';
import type { ActiveRuns } from './active-runs';
import type { RunLifecycleService } from './run-lifecycle.service';
import type { RunFollowsService } from './run-follows.service';
import type { ResultView, RunStreamBus } from './run-stream.bus';
import { RunsQueryService } from './runs-query.service';

/** The results stream of a run active here: its replay pages read only what its channel cannot bring. */
describe('RunsQueryService.results: replay pages of a run active here', () => {
  const stored: ResultView[] = [
    { run_id: 'r1', sequence: 1, type: 'message.delta', data: {}, usage: null, source: 'runner', timestamp: 1 },
  ];
  let shown: number;
  let active: boolean;
  let channel: Subject<ResultView> | undefined;
  let reads: number;
  let service: RunsQueryService;

  beforeEach(() => {
    shown = 0;
    active = true;
    channel = new Subject<ResultView>();
    reads = 0;
    const runs = {
      resultsAfter: (_runId: string, after: number) => {
        reads++;
        return Promise.resolve(stored.filter((r) => r.sequence > after));
      },
    } as Partial<RunsRepository>;
    const activeRuns = {
      get: (runId: string) => (active && runId === 'r1' ? { shown_sequence: shown } : undefined),
    } as Partial<ActiveRuns>;
    const lifecycle = { followWaiting: () => Promise.resolve() } as Partial<RunLifecycleService>;
    const bus = { follow: () => channel?.asObservable() } as Partial<RunStreamBus>;
    const follows = { followsFromDatabase: () => Promise.resolve(false) } as Partial<RunFollowsService>;
    service = new RunsQueryService(
      runs as RunsRepository,
      activeRuns as ActiveRuns,
      lifecycle as RunLifecycleService,
      bus as RunStreamBus,
      {} as never,
      {} as never,
      {} as never,
      {} as never,
      follows as RunFollowsService,
    );
  });

  it('nothing shown after the cursor: the page is empty without a read (the channel brings the rest)', async () => {
    const source = await service.results('r1', 0);
    source.follow();
    expect(await source.page(0, 10)).toEqual([]);
    expect(reads).toBe(0);
  });

  it('a result shown after the cursor: read from the database', async () => {
    shown = 1;
    const source = await service.results('r1', 0);
    source.follow();
    expect(await source.page(0, 10)).toEqual(stored);
    expect(reads).toBe(1);
  });

  it('the run no longer active here (ended, fenced): read from the database', async () => {
    const source = await service.results('r1', 0);
    source.follow();
    active = false;
    expect(await source.page(0, 10)).toEqual(stored);
    expect(reads).toBe(1);
  });

  it('no channel followed (none open, or not followed yet): read from the database', async () => {
    channel = undefined;
    const source = await service.results('r1', 0);
    source.follow();
    expect(await source.page(0, 10)).toEqual(stored);
    const unfollowed = await service.results('r1', 0);
    expect(await unfollowed.page(0, 10)).toEqual(stored);
    expect(reads).toBe(2);
  });
});
