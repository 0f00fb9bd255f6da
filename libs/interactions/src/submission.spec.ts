import { parseInteractionRequest, type InteractionRequest } from './request';
import { validateSubmission } from './submission';

const parsed = parseInteractionRequest(
  {
    interaction_id: 'q',
    title: 'T',
    fields: [
      { id: 'name', label: 'Name', type: 'text', required: true },
      { id: 'bio', label: 'Bio', type: 'textarea' },
      {
        id: 'one',
        label: 'One',
        type: 'select',
        options: [
          { value: 'a', label: 'A' },
          { value: 'b', label: 'B' },
        ],
      },
      {
        id: 'many',
        label: 'Many',
        type: 'multiselect',
        options: [
          { value: 'x', label: 'X' },
          { value: 'y', label: 'Y' },
        ],
      },
      { id: 'n', label: 'N', type: 'number' },
      { id: 'yes', label: 'Yes', type: 'boolean' },
      { id: 'doc', label: 'Doc', type: 'file' },
    ],
    actions: [{ id: 'approve', label: 'Approve' }],
    fallback_text: 'f',
  },
  0,
);
const request: InteractionRequest = parsed.ok ? parsed.request : (undefined as never);

function fieldOf(input: Parameters<typeof validateSubmission>[1]): string | null {
  const r = validateSubmission(request, input);
  return r.ok ? null : r.field;
}

describe('validateSubmission', () => {
  it('accepts values of every type; absent optional fields are left out', () => {
    const r = validateSubmission(request, {
      action_id: 'approve',
      values: { name: 'Ada', one: 'b', many: ['y', 'x'], n: 0, yes: false, doc: 'file://1', bio: '' },
    });
    expect(r).toEqual({
      ok: true,
      action_id: 'approve',
      values: { name: 'Ada', one: 'b', many: ['y', 'x'], n: 0, yes: false, doc: 'file://1' },
    });
  });

  it.each([
    [{ values: {} }, 'values.name'],
    [{ values: { name: '' } }, 'values.name'],
    [{ values: { name: 5 } }, 'values.name'],
    [{ values: { name: 'x'.repeat(20_001) } }, 'values.name'],
    [{ values: { name: 'A', one: 'c' } }, 'values.one'],
    [{ values: { name: 'A', one: ['a'] } }, 'values.one'],
    [{ values: { name: 'A', many: 'x' } }, 'values.many'],
    [{ values: { name: 'A', many: ['x', 'z'] } }, 'values.many'],
    [{ values: { name: 'A', many: ['x', 'x'] } }, 'values.many'],
    [{ values: { name: 'A', n: '3' } }, 'values.n'],
    [{ values: { name: 'A', n: Number.NaN } }, 'values.n'],
    [{ values: { name: 'A', yes: 'true' } }, 'values.yes'],
    [{ values: { name: 'A', doc: 3 } }, 'values.doc'],
    [{ values: { name: 'A', other: 1 } }, 'values.other'],
    [{ action_id: 'reject', values: { name: 'A' } }, 'action_id'],
  ])('refuses %j naming %s', (input, field) => {
    expect(fieldOf(input)).toBe(field);
  });

  it('refuses values that are not an object', () => {
    expect(fieldOf({ values: ['x'] as unknown as Record<string, unknown> })).toBe('values');
  });
});
