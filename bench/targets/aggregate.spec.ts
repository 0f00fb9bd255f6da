import { aggregateTargets, median, targetsOf, type TargetJson } from './aggregate';

const t = (target: string, ratio: number | null, met: boolean | null, database = 'SQLite'): TargetJson => ({
  target,
  database,
  ratio,
  ratio_text: ratio === null ? undefined : `${ratio} RTT`,
  goal: '≤ 36 RTT',
  met,
});

describe('aggregateTargets', () => {
  it('gives each run’s ratio, the median run and the runs that met it; met when most runs meet it', () => {
    const [c1] = aggregateTargets([[t('c1', 40, false)], [t('c1', 30, true)], [t('c1', 35, true)]]);
    expect(c1).toMatchObject({
      target: 'c1',
      database: 'SQLite',
      goal: '≤ 36 RTT',
      ratios: [40, 30, 35],
      texts: ['40 RTT', '30 RTT', '35 RTT'],
      median: 35,
      medianText: '35 RTT',
      metRuns: 2,
      measured: 3,
      met: true,
    });
  });

  it('a target met in one run of two, or of three, is not met', () => {
    expect(aggregateTargets([[t('c1', 30, true)], [t('c1', 40, false)]])[0]).toMatchObject({ met: false, median: 35 });
    expect(aggregateTargets([[t('c1', 30, true)], [t('c1', 40, false)], [t('c1', 50, false)]])[0].met).toBe(false);
  });

  it('keeps targets of different databases apart, in the order they first appear', () => {
    const series = aggregateTargets([
      [t('c1', 30, true, 'SQLite'), t('c1', 90, false, 'PostgreSQL')],
      [t('c1', 32, true, 'SQLite')],
    ]);
    expect(series.map((s) => [s.database, s.ratios])).toEqual([
      ['SQLite', [30, 32]],
      ['PostgreSQL', [90, null]],
    ]);
    expect(series[1]).toMatchObject({ measured: 1, metRuns: 0, met: false });
  });

  it('a target no run judged (soak RSS) is neither met nor missed', () => {
    const [rss] = aggregateTargets([[t('rss', 1.01, null)], [t('rss', 0.99, null)]]);
    expect(rss).toMatchObject({ met: null, measured: 0, median: 1 });
  });

  it('a ratio without a text (bench/host-api) is shown with two decimals', () => {
    const [s] = aggregateTargets([[{ target: 'StateGet', ratio: 1.456, goal: '≤ 1.5 ×', met: true }]]);
    expect(s).toMatchObject({ database: '—', medianText: '1.46 ×', met: true });
  });
});

describe('targetsOf and median', () => {
  it('reads the targets of a --json document, nothing from anything else', () => {
    expect(targetsOf({ targets: [t('c1', 1, true)] })).toHaveLength(1);
    expect(targetsOf({ bench: 'dispatch' })).toEqual([]);
    expect(targetsOf(null)).toEqual([]);
  });

  it('median of odd and even counts, NaN of none', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
});
