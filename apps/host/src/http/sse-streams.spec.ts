import { DomainError } from '@libs/protocol';
import { resumeAfter } from './sse-streams';

describe('resumeAfter', () => {
  it.each([
    [undefined, undefined, 0],
    [7, undefined, 7],
    [7, '3', 7], // ?after= wins over the header
    [undefined, '3', 3],
    [undefined, ' 12 ', 12],
    [undefined, '2147483647', 2_147_483_647],
  ])('after=%p, Last-Event-ID=%p → %p', (after, header, expected) => {
    expect(resumeAfter('results', after, header)).toBe(expected);
  });

  it.each(['abc', '-1', '1.5', '', '2147483648', '99999999999999999999', '12345678901'])(
    'refuses Last-Event-ID %p naming the header and the range',
    (header) => {
      let error: unknown;
      try {
        resumeAfter('deliveries', undefined, header);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(DomainError);
      expect(error).toMatchObject({
        code: 'invalid_argument',
        message: 'Last-Event-ID: must be a delivery op sequence number (an integer from 0 to 2147483647)',
        details: { field: 'Last-Event-ID' },
      });
    },
  );
});
