import type { ActiveRun } from './active-run';

/**
 * The narrow port for code beside a run that must act in the run's order (behind its results, never
 * overtaking one): interactions emitting a delivery op, tool telemetry forwarding progress. The
 * run's lifecycle implements it and stays the only writer of the run (docs/architecture.md).
 */
export abstract class RunSteps {
  /** Queues `step` behind the run's earlier steps; a failing step is logged, never thrown here. */
  abstract enqueue(run: ActiveRun, step: () => Promise<void>): void;
}
