import { hostMetered, runUsage, runnerUsage } from './run-usage';

describe('run usage', () => {
  it.each([
    ['all counts', { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }, { total_tokens: 7, complete: true }],
    ['total derived from the parts', { prompt_tokens: 3, completion_tokens: 4 }, { total_tokens: 7, complete: true }],
    [
      'a count missing: unknown, not 0',
      { prompt_tokens: 3, total_tokens: 7 },
      { completion_tokens: null, complete: false },
    ],
    ['no report', null, { prompt_tokens: null, total_tokens: null, complete: false }],
    [
      'provider counters kept',
      { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 9 },
      { cached_tokens: 9, complete: true },
    ],
    [
      'negative is not a count',
      { prompt_tokens: -1, completion_tokens: 1, total_tokens: 0 },
      { prompt_tokens: null, complete: false },
    ],
  ])('runner: %s', (_n, reported, expected) => {
    expect(runnerUsage(reported as Record<string, unknown> | null)).toMatchObject(expected);
  });

  it('host metering sums the calls; one unknown call makes it incomplete and its sums unknown', () => {
    const known = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, complete: true };
    expect(hostMetered([known, known])).toEqual({
      calls: 2,
      prompt_tokens: 20,
      completion_tokens: 10,
      total_tokens: 30,
      complete: true,
    });
    const unknown = { prompt_tokens: null, completion_tokens: null, total_tokens: null, complete: false };
    expect(hostMetered([known, unknown])).toMatchObject({ calls: 2, total_tokens: null, complete: false });
    expect(hostMetered([])).toEqual({
      calls: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
      total_tokens: 0,
      complete: true,
    });
  });

  it('the two sources stay independent on the run record', () => {
    const u = runUsage({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }, [
      { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150, complete: true },
    ]);
    expect(u).toMatchObject({ total_tokens: 3, complete: true, host_metered: { calls: 1, total_tokens: 150 } });
  });
});
