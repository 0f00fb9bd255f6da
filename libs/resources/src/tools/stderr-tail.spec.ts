import { StderrTail } from './stderr-tail';

describe('StderrTail', () => {
  it('keeps the last 20 non-empty lines, across chunk boundaries, at most 2000 characters', () => {
    const tail = new StderrTail();
    expect(tail.suffix()).toBe('');
    tail.push('starting\n\nfatal: can');
    tail.push('not open db\r\n');
    expect(tail.text()).toBe('starting\nfatal: cannot open db');
    for (let i = 0; i < 30; i++) {
      tail.push(`line ${i}\n`);
    }
    tail.push('unfinished');
    expect(tail.text().split('\n')).toEqual([...Array.from({ length: 20 }, (_, i) => `line ${i + 10}`), 'unfinished']);
    tail.push(`${'x'.repeat(5000)}\n`);
    expect(tail.text().length).toBeLessThanOrEqual(2001);
    expect(tail.suffix()).toMatch(/^; its stderr ends with:\n…/);
  });
});
