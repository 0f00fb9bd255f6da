import { z } from 'zod';
import { runContextSchema } from './run-context';

/*
 * What the host tells a runner on its session (docs/protocol.md#the-run-context and docs/protocol.md#cancel), as the
 * domain sees it. The runner gateway turns these into `HostMessage`s of
 * proto/runnerhost/v1/gateway.proto; the built-in runner reads them in process.
 */

/** A run for a runner: `run {runner_id, runner_name, context, traceparent}`. */
export const runDispatchSchema = z.object({
  runner_id: z.string(),
  runner_name: z.string(),
  context: runContextSchema,
  /** The W3C trace context of the run (docs/observability.md#traces); empty when traces are off. */
  traceparent: z.string(),
});
export type RunDispatch = z.infer<typeof runDispatchSchema>;

/** Stop working on a run (cancel, deadline, a host verdict): `cancel {run_id, reason}`. */
export const runCancelSchema = z.object({
  run_id: z.string(),
  reason: z.string(),
});
export type RunCancel = z.infer<typeof runCancelSchema>;

/** One command to a runner session: exactly one of `run` and `cancel`. */
export type RunnerCommand = { run: RunDispatch; cancel?: undefined } | { cancel: RunCancel; run?: undefined };
