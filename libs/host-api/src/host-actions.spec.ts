import type { HostApiAction } from '@libs/protocol';
import { HostActions } from './host-actions';

/** A request that every action's `needs` can read (the ids it names are what the gate checks). */
const REQUEST = { model_id: 'm', tool_name: 't', kb_id: 'k', area: 'plugin', key: 'k', scope: 'conversation' };

describe('HostActions: which calls are audited behind their answer', () => {
  it('exactly the actions that only read the host’s own data are `read` (docs/durability.md#audit-rows-of-read-calls)', () => {
    const none = {} as never; // `needs` reads only the request: no service is called
    const actions = new HostActions(none, none, none, none, none, none, none, none);
    const reads = (Object.keys(actions.table) as HostApiAction[]).filter(
      (name) => actions.table[name].needs(REQUEST as never).read === true,
    );
    expect(reads.sort()).toEqual([
      'event.get',
      'event.page',
      'history.page',
      'history.search',
      'prompt.get',
      'run.get',
      'state.get',
      'state.list',
      'storage.get',
      'storage.list',
    ]);
  });
});
