import { MAX_SEQUENCE, decideSequence } from './sequence-rules';

describe('decideSequence (docs/protocol.md#result-rules)', () => {
  const seen = new Set([1, 2, 3, 7]);
  it.each([
    ['missing → last + 1', undefined, 7, { accept: true, sequence: 8 }],
    ['null → last + 1', null, 7, { accept: true, sequence: 8 }],
    ['next in order', 8, 7, { accept: true, sequence: 8 }],
    [
      'zero is invalid → last + 1, warned',
      0,
      7,
      { accept: true, sequence: 8, warning: expect.stringContaining('invalid') },
    ],
    ['negative → last + 1', -4, 7, { accept: true, sequence: 8, warning: expect.stringContaining('invalid') }],
    ['fraction → last + 1', 8.5, 7, { accept: true, sequence: 8, warning: expect.stringContaining('invalid') }],
    [
      'beyond the database → last + 1',
      MAX_SEQUENCE + 1,
      7,
      { accept: true, sequence: 8, warning: expect.stringContaining('invalid') },
    ],
    ['2^53 → last + 1', 2 ** 53, 7, { accept: true, sequence: 8, warning: expect.any(String) }],
    [
      'the largest storable one is kept',
      MAX_SEQUENCE,
      7,
      { accept: true, sequence: MAX_SEQUENCE, warning: expect.stringContaining('gap') },
    ],
    ['duplicate → dropped', 3, 7, { accept: false, warning: expect.stringContaining('duplicate') }],
    ['gap → kept, warned', 10, 7, { accept: true, sequence: 10, warning: expect.stringContaining('gap') }],
    [
      'late (reordered) → kept, warned',
      5,
      7,
      { accept: true, sequence: 5, warning: expect.stringContaining('out-of-order') },
    ],
  ])('%s', (_name, raw, last, expected) => {
    expect(decideSequence(raw, last, seen)).toEqual(expected);
  });
});
