import { DEFAULT_EXPIRY_MS, MAX_EXPIRY_MS, parseInteractionRequest, presentationFor } from './request';

const NOW = 1_800_000_000_000;
const base = {
  interaction_id: 'q1',
  title: 'Pick',
  fields: [{ id: 'c', label: 'Colour', type: 'select', options: [{ value: 'r', label: 'Red' }] }],
  actions: [{ id: 'ok', label: 'OK', style: 'primary' }],
  fallback_text: 'Reply with a colour',
};

function refused(payload: unknown) {
  const r = parseInteractionRequest(payload, NOW);
  if (r.ok) {
    throw new Error('expected a refusal');
  }
  return r;
}

describe('parseInteractionRequest', () => {
  it('defaults: kind form, expiry now + 30 min', () => {
    const r = parseInteractionRequest(base, NOW);
    expect(r.ok && r.request.kind).toBe('form');
    expect(r.ok && r.expires_at_ms).toBe(NOW + DEFAULT_EXPIRY_MS);
    expect(r.ok && r.request.expires_at).toBe(Math.floor((NOW + DEFAULT_EXPIRY_MS) / 1000));
  });

  it('expiry: in the future, at most 24 h ahead', () => {
    expect(refused({ ...base, expires_at: NOW / 1000 - 1 }).field).toBe('payload.expires_at');
    expect(refused({ ...base, expires_at: (NOW + MAX_EXPIRY_MS) / 1000 + 1 }).field).toBe('payload.expires_at');
    const ok = parseInteractionRequest({ ...base, expires_at: (NOW + MAX_EXPIRY_MS) / 1000 }, NOW);
    expect(ok.ok).toBe(true);
  });

  it.each([
    [{ ...base, fallback_text: undefined }, 'payload.fallback_text'],
    [{ ...base, fallback_text: '' }, 'payload.fallback_text'],
    [{ ...base, interaction_id: 'x'.repeat(256) }, 'payload.interaction_id'],
    [{ ...base, title: 'x'.repeat(1001) }, 'payload.title'],
    [{ ...base, description: 'x'.repeat(10_001) }, 'payload.description'],
    [{ ...base, kind: 'survey' }, 'payload.kind'],
    [
      { ...base, fields: Array.from({ length: 51 }, (_, i) => ({ id: `f${i}`, label: 'L', type: 'text' })) },
      'payload.fields',
    ],
    [{ ...base, actions: Array.from({ length: 21 }, (_, i) => ({ id: `a${i}`, label: 'L' })) }, 'payload.actions'],
    [{ ...base, fields: [{ id: 'f', label: 'L', type: 'color' }] }, 'payload.fields.0.type'],
    [{ ...base, fields: [{ id: 'x'.repeat(129), label: 'L', type: 'text' }] }, 'payload.fields.0.id'],
    [{ ...base, actions: [{ id: 'a', label: 'L', style: 'loud' }] }, 'payload.actions.0.style'],
    [{ ...base, extra: 1 }, 'payload'],
  ])('a broken limit names its field (%#)', (payload, field) => {
    expect(refused(payload).field).toBe(field);
  });

  it('duplicates and option-less selects are refused', () => {
    const f = { id: 'a', label: 'A', type: 'text' };
    expect(refused({ ...base, fields: [f, f] }).field).toBe('payload.fields.1.id');
    expect(
      refused({
        ...base,
        actions: [
          { id: 'x', label: 'X' },
          { id: 'x', label: 'Y' },
        ],
      }).field,
    ).toBe('payload.actions.1.id');
    expect(refused({ ...base, fields: [{ id: 's', label: 'S', type: 'multiselect' }] }).reason).toMatch(/option/);
    const opts = [
      { value: 'v', label: 'A' },
      { value: 'v', label: 'B' },
    ];
    expect(refused({ ...base, fields: [{ id: 's', label: 'S', type: 'select', options: opts }] }).field).toBe(
      'payload.fields.0.options.1.value',
    );
  });

  it('a request over 256 KiB is refused', () => {
    const fields = Array.from({ length: 50 }, (_, i) => ({
      id: `f${i}`,
      label: 'L',
      type: 'select',
      options: Array.from({ length: 100 }, (_, j) => ({ value: `v${j}`, label: 'x'.repeat(60) })),
    }));
    expect(refused({ ...base, fields }).field).toBe('payload');
  });
});

describe('presentationFor', () => {
  const r = parseInteractionRequest(base, NOW);
  const request = r.ok ? r.request : (undefined as never);
  it('form only when the surface declared what the request needs', () => {
    expect(presentationFor(request, null)).toBe('fallback');
    expect(presentationFor(request, {})).toBe('form');
    expect(presentationFor(request, { field_types: ['text'] })).toBe('fallback');
    expect(presentationFor(request, { action_styles: ['default'] })).toBe('fallback');
    expect(presentationFor(request, { max_fields: 0 })).toBe('fallback');
    expect(presentationFor(request, { field_types: ['select'], max_fields: 1 })).toBe('form');
  });
});
