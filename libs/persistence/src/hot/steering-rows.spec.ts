import { conversationKey } from './steering-rows';

describe('conversationKey', () => {
  it('tells workspaces apart: a missing workspace matches only a missing one, not the empty name', () => {
    const keys = [
      conversationKey('agent-1', 'tenant-1', 'c1', null),
      conversationKey('agent-1', 'tenant-2', 'c1', null),
      conversationKey('agent-1', null, 'c1', null),
      conversationKey('agent-1', '', 'c1', null),
    ];
    expect(new Set(keys).size).toBe(4);
    expect(conversationKey('agent-1', null, 'c1', null)).toBe(conversationKey('agent-1', null, 'c1', null));
  });

  it('is unambiguous for ids that contain separators or quotes', () => {
    expect(conversationKey('a', 'b","c', 'd', null)).not.toBe(conversationKey('a', 'b', 'c","d', null));
    expect(conversationKey('a', 'w', 'c', 't')).not.toBe(conversationKey('a', 'w', 'c', null));
  });
});
