import { DomainError } from '@libs/protocol';
import { parseQuotas } from './workspaces.service';

function fieldOf(raw: unknown): unknown {
  try {
    parseQuotas(raw);
  } catch (e) {
    if (e instanceof DomainError) {
      return e.details.field;
    }
    throw e;
  }
  throw new Error('accepted');
}

describe('parseQuotas (docs/tenancy.md#quotas)', () => {
  it('keeps positive integers, drops nulls (unlimited), and an absent object is no quota', () => {
    expect(parseQuotas(undefined)).toEqual({});
    expect(parseQuotas({ runs_per_second: 5, runs_burst: 10, max_active_runs: null })).toEqual({
      runs_per_second: 5,
      runs_burst: 10,
    });
  });

  it('refuses anything else naming the field', () => {
    expect(fieldOf([])).toBe('quotas');
    expect(fieldOf({ runs_per_second: 0 })).toBe('quotas.runs_per_second');
    expect(fieldOf({ max_storage_bytes: 1.5 })).toBe('quotas.max_storage_bytes');
    expect(fieldOf({ max_active_runs: '3' })).toBe('quotas.max_active_runs');
    expect(fieldOf({ tokens: 3 })).toBe('quotas.tokens');
  });
});
