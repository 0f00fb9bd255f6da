import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { medianSurvivedPerScavenge } from '@libs/testing';
import { ActiveRun } from './active-run';
import { LazyConversationRows, steeringParts } from './concurrency/admission-rows';
import { testSnapshot } from './testing/snapshot';
import type { RunnerSession } from '@libs/runner-gateway';
import type { EventSubmission } from './event-submission';

/**
 * Why the run path has no object-literal `get`/`set` (docs/benchmarks.md "Ended runs kept for the
 * scavenger: accessor pairs of object literals (round 16, wt-gc16b)"): V8 allocates the accessor
 * pair of each object a literal with a getter makes in the OLD generation (factory.cc
 * `NewAccessorPair`, `AllocationType::kOld`). An old object is a root for every young-generation
 * GC until a full GC frees it, dead or not, so the getter's closure — and the run its scope holds —
 * survives every scavenge after the run ended and is promoted. A class's getters are its
 * prototype's, made once. Measured in a child process by V8's own GC trace (bytes surviving each
 * scavenge): an allocation-driven workload, so the same on any machine.
 */
describe('accessor pairs and the young-generation GC', () => {
  const workload = (kind: 'literal' | 'class') => `
    class View { constructor(run) { this.id = run.id; this.run_ = run; } get active() { return !this.run_.ended; } }
    const garbage = (n) => { const g = []; for (let k = 0; k < n; k++) g.push({ k }); return g.length; };
    let sink = null;
    for (let i = 0; i < 3000; i++) {
      const run = { id: i, ended: false, rows: [] };
      for (let k = 0; k < 500; k++) run.rows.push({ k, s: 'v' + k }); // ~25 KB a run
      const view = ${kind === 'literal' ? '{ id: run.id, get active() { return !run.ended; } }' : 'new View(run)'};
      sink = view.active;
      run.ended = true; // the run and its view are garbage from here
      garbage(4000);
    }`;

  it('an object literal with a getter keeps every ended run for the scavenges; a class does not', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'accessor-pairs-'));
    try {
      const literal = medianSurvivedPerScavenge(dir, 'literal', workload('literal'));
      const view = medianSurvivedPerScavenge(dir, 'class', workload('class'));
      // A literal: every run since the last full GC survives (megabytes a scavenge on Node 20);
      // a class: the run in flight (a few KB).
      expect(literal).toBeGreaterThan(1_000_000);
      expect(view).toBeLessThan(200_000);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** The run path's views are made without own accessors (see above). */
describe('no own accessors on the run path', () => {
  const ownAccessors = (o: object) =>
    Object.entries(Object.getOwnPropertyDescriptors(o))
      .filter(([, d]) => d.get !== undefined || d.set !== undefined)
      .map(([k]) => k);

  it("an active run's grant, the steering parts and the admission's conversation rows", () => {
    const session = { session_id: 's1', plugin_id: 'x/y' } as RunnerSession;
    const run = new ActiveRun(
      { run_id: 'r1', agent_id: 'a1', session, snapshot: testSnapshot() },
      { cancelGraceMs: 1000, onEnd: () => undefined },
    );
    expect(ownAccessors(run.grant)).toEqual([]);
    expect(run.grant.active).toBe(true);
    const sub = { agent_id: 'a1', event: { event_type: 'message.received', source: 's' }, input: { text: 'hi' } };
    const parts = steeringParts('e1', sub as EventSubmission, 'r1', 5_000, null);
    expect(ownAccessors(parts)).toEqual([]);
    const rows = new LazyConversationRows(
      { key: 'k', agent_id: 'a1', workspace_id: null, conversation_id: 'c1', thread_id: null } as never,
      {} as never,
      parts,
      false,
    );
    expect(ownAccessors(rows)).toEqual([]);
    expect(rows.submission).toBe(parts.submission);
    expect(rows.item).toBe(parts.item);
  });
});
