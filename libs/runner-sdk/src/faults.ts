import type { JsonObject } from './json';
import type { Usage } from './types';

/*
 * Protocol fault hooks: the one way around the rules the SDK enforces (sequencing, one terminal
 * result, stopping on cancel), for test runners whose job is to break them — the demo runner's
 * fault modes exercise the host's handling of a misbehaving plugin (docs/runner-sdk.md#protocol-fault-hooks).
 * The dispatcher registers the hooks of each run's io here; authors reach them only through
 * `protocolFaults(io)` of the testing entry point, never through RunIO itself.
 */

/** One result written as it is, past the SDK's checks. */
export interface RawResult {
  type: string;
  data: JsonObject;
  usage?: Usage;
  /** Sent as it is (duplicates, gaps); null or absent leaves it out (the host assigns last+1). */
  sequence?: number | null;
}

export interface ProtocolFaults {
  /**
   * Writes a result through the run's outbox, in order with its other results, without
   * sequencing or the terminal rule: it may repeat or skip a sequence, leave it out, or follow
   * the terminal result. A raw terminal result ends the run's own emitters (nothing else follows).
   */
  sendRaw(result: RawResult): Promise<void>;
  /** From now on the host's cancel and the run's deadline are ignored: only a lost stream ends the run. */
  ignoreCancel(): void;
}

/**
 * The hooks live on the run's `io` (a RunIO; typed as object to keep this module below
 * runner.ts) under a symbol this module does not export: a property costs a run nothing, where
 * a WeakMap entry per run added to every garbage collection (docs/runner-sdk.md#performance).
 */
const FAULTS = Symbol('runner-sdk.protocolFaults');

/** @internal Called by the dispatcher for each run. */
export function registerFaults(io: object, faults: ProtocolFaults): void {
  (io as { [FAULTS]?: ProtocolFaults })[FAULTS] = faults;
}

/** The fault hooks of a run (its `io` as given to the handler). */
export function faultsOf(io: object): ProtocolFaults {
  const faults = typeof io === 'object' && io !== null ? (io as { [FAULTS]?: ProtocolFaults })[FAULTS] : undefined;
  if (!faults) {
    throw new TypeError('protocolFaults: not the io of a run started by the SDK');
  }
  return faults;
}
