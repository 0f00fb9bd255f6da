import { z } from 'zod';
import { describeIssues, MAX_LISTED_PROBLEMS } from './zod-issues';

const policy = z.strictObject({ ids: z.array(z.string()).max(1000).optional(), on: z.boolean().optional() });
const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 0]));
const described = (value: unknown) => {
  const r = policy.safeParse(value);
  if (r.success) {
    throw new Error('admitted');
  }
  return describeIssues(r.error, 'resource_policy');
};

describe('describeIssues (docs/api.md#validation)', () => {
  it('lists every problem when there are at most 100, as zod words them', () => {
    expect(described({ on: 1, x: 1, y: 2 })).toBe(
      'resource_policy.on: Invalid input: expected boolean, received number; resource_policy: Unrecognized keys: "x", "y"',
    );
    expect(described(keys(MAX_LISTED_PROBLEMS))).toMatch(/^resource_policy: Unrecognized keys: "k0", .*"k99"$/);
  });

  it('lists the first 100 unknown keys of 49,990 and counts the others', () => {
    const text = described(keys(49_990));
    expect(text).toMatch(/^resource_policy: Unrecognized keys: "k0", "k1", .*"k99"; and 49890 more problems$/);
    expect(text).not.toContain('"k100"');
    expect(text.length).toBeLessThan(2_000);
  });

  it('counts the problems after the 100th, whatever their kind', () => {
    const text = described({ on: 'no', ...keys(150) });
    expect(text).toMatch(
      /^resource_policy.on: Invalid input: expected boolean, received string; resource_policy: Unrecognized keys: "k0", .*"k98"; and 51 more problems$/,
    );
  });
});
