import { steeringItemSchema, steeringItemsOf } from './steering';

const item = (over: Record<string, unknown> = {}) => ({
  item_id: 'e2',
  claimed_run_id: 'run-1',
  runner_id: 'plugin:acme/echo/default',
  claimed_at: 1_700_000_000,
  position: 1,
  event: { event_id: 'e2', event_type: 'message.received', source: 'api', data: {} },
  conversation: { conversation_id: 'c' },
  actor: null,
  subject: null,
  input: { text: 'and also' },
  ...over,
});

describe('steeringItemsOf (a pull of stored steering items)', () => {
  it('hands out the items admission stored, unchanged, when their shape holds', () => {
    const stored = [item(), item({ item_id: 'e3', position: 2 })];
    expect(steeringItemsOf(stored)).toBe(stored);
    // What the cheap check admits the protocol schema admits too (the items are built as its type).
    expect(() => steeringItemSchema.array().parse(stored)).not.toThrow();
  });

  it.each<[string, unknown, string]>([
    ['not an object', 'x', 'stored steering item 0: not an object'],
    ['no item id', item({ item_id: undefined }), 'stored steering item 0: item_id is not a string'],
    ['position text', item({ position: '1' }), 'stored steering item 0: position or claimed_at is not an integer'],
    ['no event type', item({ event: {} }), 'stored steering item 0: event.event_type is not a string'],
    ['input null', item({ input: null }), 'stored steering item 0: input is not an object'],
  ])('refuses a broken stored item (%s), naming it', (_name, stored, message) => {
    expect(() => steeringItemsOf([stored])).toThrow(message);
  });

  it('names the index of the broken item', () => {
    expect(() => steeringItemsOf([item(), item({ runner_id: 7 })])).toThrow(
      'stored steering item 1: runner_id is not a string',
    );
  });
});
