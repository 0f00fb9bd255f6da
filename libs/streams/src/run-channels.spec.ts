import { RunChannels } from './run-channels';

interface Item {
  run_id: string;
  n: number;
}

describe('RunChannels', () => {
  it('fans a run’s items out to its readers only, and completes them at the end', () => {
    const channels = new RunChannels<Item>();
    channels.open('a');
    channels.open('b');
    const seen: number[] = [];
    let completed = false;
    channels.follow('a')!.subscribe({ next: (i) => seen.push(i.n), complete: () => (completed = true) });
    channels.publish({ run_id: 'a', n: 1 });
    channels.publish({ run_id: 'b', n: 2 });
    channels.publish({ run_id: 'a', n: 3 });
    channels.end('a');
    expect(seen).toEqual([1, 3]);
    expect(completed).toBe(true);
    expect(channels.follow('a')).toBeNull();
  });

  it('keeps an open channel and its readers when opened again (a queued run that starts)', () => {
    const channels = new RunChannels<Item>();
    channels.open('a');
    const seen: number[] = [];
    channels.follow('a')!.subscribe((i) => seen.push(i.n));
    channels.open('a');
    channels.publish({ run_id: 'a', n: 1 });
    expect(seen).toEqual([1]);
  });

  it('drops items of a run that is not open here', () => {
    const channels = new RunChannels<Item>();
    expect(() => channels.publish({ run_id: 'x', n: 1 })).not.toThrow();
    expect(channels.follow('x')).toBeNull();
  });
});
