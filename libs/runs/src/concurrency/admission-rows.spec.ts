import type { EventSubmission } from '../event-submission';
import { steeringItem, steeringParts } from './admission-rows';

function submission(): { sub: EventSubmission; reads: () => number } {
  let reads = 0;
  const event = { event_type: 'message.received', source: 'api', data: { k: 1 } };
  const sub = {
    agent_id: 'a1',
    conversation: { conversation_id: 'c1', thread_id: null, bot_id: null, workspace_id: null },
    input: { text: 'hi' },
    get event() {
      reads++;
      return event;
    },
  } as unknown as EventSubmission;
  return { sub, reads: () => reads };
}

describe('steeringParts (what a steered or queued event stores)', () => {
  it('builds nothing until read', () => {
    const { sub, reads } = submission();
    steeringParts('e1', sub, 'r1', 5_000, null);
    expect(reads()).toBe(0);
  });

  it('reads as the steering item and a copy of the submission, each built once', () => {
    const { sub } = submission();
    const parts = steeringParts('e1', sub, 'r1', 5_000, '00-trace-01');
    const item = parts.item;
    expect(item).toEqual(steeringItem('e1', sub, 'r1', 5_000, '00-trace-01'));
    expect(parts.item).toBe(item);
    const stored = parts.submission;
    expect(stored).toEqual({ ...sub });
    expect(stored).not.toBe(sub);
    expect(parts.submission).toBe(stored);
  });
});
