import { elicitationRequest, elicitationResult } from './elicitation';
import { parseInteractionRequest } from './request';

describe('MCP elicitation as an interaction', () => {
  it('maps a flat requested schema to form fields, accept/decline actions and a fallback text', () => {
    const payload = elicitationRequest(
      {
        message: 'Where to?',
        requestedSchema: {
          type: 'object',
          properties: {
            city: { type: 'string', title: 'City', description: 'Where you go' },
            nights: { type: 'integer', default: 2 },
            breakfast: { type: 'boolean' },
            room: { type: 'string', enum: ['s', 'd'], enumNames: ['Single', 'Double'] },
            view: { type: 'string', oneOf: [{ const: 'sea', title: 'Sea' }] },
            extras: { type: 'array', items: { enum: ['spa', 'gym'] } },
          },
          required: ['city'],
        },
      },
      'elicitation:1',
    );
    const r = parseInteractionRequest(payload, 0);
    expect(r.ok).toBe(true);
    const request = r.ok ? r.request : (undefined as never);
    expect(request.fields.map((f) => [f.id, f.type, f.required])).toEqual([
      ['city', 'text', true],
      ['nights', 'number', false],
      ['breakfast', 'boolean', false],
      ['room', 'select', false],
      ['view', 'select', false],
      ['extras', 'multiselect', false],
    ]);
    expect(request.fields[0]).toMatchObject({ label: 'City', placeholder: 'Where you go' });
    expect(request.fields[1].default).toBe(2);
    expect(request.fields[3].options).toEqual([
      { value: 's', label: 'Single' },
      { value: 'd', label: 'Double' },
    ]);
    expect(request.actions.map((a) => a.id)).toEqual(['accept', 'decline']);
    expect(request.title).toBe('Where to?');
    expect(request.fallback_text).toBe('Where to?\n- City (required)\n- nights\n- breakfast\n- room\n- view\n- extras');
  });

  it('answers accept with the values, decline, or cancel when it ended unanswered', () => {
    const s = { interaction_id: 'e', submitted_at: 1, values: { city: 'Oslo' } };
    expect(elicitationResult({ ...s, action_id: 'accept' })).toEqual({ action: 'accept', content: { city: 'Oslo' } });
    expect(elicitationResult({ ...s, action_id: null })).toEqual({ action: 'accept', content: { city: 'Oslo' } });
    expect(elicitationResult({ ...s, action_id: 'decline' })).toEqual({ action: 'decline' });
    expect(elicitationResult(null)).toEqual({ action: 'cancel' });
  });
});
