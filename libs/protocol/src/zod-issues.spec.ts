import { z } from 'zod';
import { DomainError } from './errors';
import { describeIssues, MAX_LISTED_PROBLEMS, zodRefusal } from './zod-issues';

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

describe('zodRefusal (docs/api.md#validation)', () => {
  const refused = (value: unknown, field = 'resource_policy') => {
    const r = policy.safeParse(value);
    if (r.success) {
      throw new Error('admitted');
    }
    return zodRefusal(r.error, field);
  };

  it('lists each problem as {field, rule}, an unknown key under its own path, beside the sentence', () => {
    const e = refused({ on: 1, x: 1, 'odd key': 2 });
    expect(e).toBeInstanceOf(DomainError);
    expect(e.code).toBe('invalid_argument');
    expect(e.message).toBe(
      'resource_policy.on: Invalid input: expected boolean, received number; resource_policy: Unrecognized keys: "x", "odd key"',
    );
    expect(e.details).toEqual({
      field: 'resource_policy',
      problems: [
        { field: 'resource_policy.on', rule: 'Invalid input: expected boolean, received number' },
        { field: 'resource_policy.x', rule: 'property x should not exist' },
        { field: 'resource_policy["odd key"]', rule: 'property odd key should not exist' },
      ],
    });
  });

  it("names nested and array fields under the caller's root", () => {
    const e = refused({ ids: ['a', 7] }, 'messages[0]');
    expect(e.details).toEqual({
      field: 'messages[0]',
      problems: [{ field: 'messages[0].ids.1', rule: 'Invalid input: expected string, received number' }],
    });
  });

  it('lists 100 problems of 49,990 unknown keys and counts the rest in problems_omitted', () => {
    const e = refused(keys(49_990));
    const details = e.details as { problems: { field: string; rule: string }[]; problems_omitted: number };
    expect(details.problems).toHaveLength(MAX_LISTED_PROBLEMS);
    expect(details.problems[0]).toEqual({ field: 'resource_policy.k0', rule: 'property k0 should not exist' });
    expect(details.problems.at(-1)).toEqual({ field: 'resource_policy.k99', rule: 'property k99 should not exist' });
    expect(details.problems_omitted).toBe(49_890);
    expect(e.message).toMatch(/; and 49890 more problems$/);
  });

  it('counts problems of any kind after the 100th', () => {
    const e = refused({ on: 'no', ...keys(150) });
    const details = e.details as { problems: unknown[]; problems_omitted: number };
    expect(details.problems).toHaveLength(MAX_LISTED_PROBLEMS);
    expect(details.problems_omitted).toBe(51);
  });
});
