/**
 * Which process starts a run (docs/scale-out.md#routing): the one holding a live Connect stream
 * of its runner. Pure rules; the presence they read is RunnerPresence (libs/runner-gateway), the
 * claim that makes a start exclusive is the waiting run's start unit (startWaitingUnit).
 */
import type { DecisionTable } from '@libs/persistence';

/** Where an event's runner is: connected here, held only by another live process, or nowhere. */
export type Route = 'here' | 'elsewhere' | 'nowhere';

export function routeOf(local: boolean, heldElsewhere: boolean): Route {
  return local ? 'here' : heldElsewhere ? 'elsewhere' : 'nowhere';
}

/**
 * The admission table of an event routed elsewhere: a free conversation does not start the run
 * here but makes it wait (`queued`) for the holding process; a busy one follows the policy as
 * always.
 */
export function routedTable(table: DecisionTable, route: Route): DecisionTable {
  return route === 'elsewhere' ? { ...table, free: 'queued' } : table;
}

/**
 * What a process's conversation dispatcher does with a waiting run, given where its runner is:
 * start it (connected here); leave it to the process holding the runner (it is woken by the
 * `conversation` signal and polls); wait for the runner to connect somewhere, up to the bound
 * (QUEUED_RUN_RUNNER_WAIT_MS); or fail it `runner.unavailable` once the bound passed.
 */
export type WaitingAction = 'start' | 'leave' | 'wait' | 'fail';

export function waitingAction(route: Route, boundPassed: boolean): WaitingAction {
  if (route === 'here') {
    return 'start';
  }
  if (route === 'elsewhere') {
    return 'leave';
  }
  return boundPassed ? 'fail' : 'wait';
}
