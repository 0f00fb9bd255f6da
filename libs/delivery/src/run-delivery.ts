import { deliveryPolicySchema } from '@libs/agents';
import type { RunStatus } from '@libs/protocol';
import {
  initialState,
  nextDueAt,
  normalise,
  type NormaliserInput,
  type NormaliserState,
  type ResultLike,
} from './delivery-normaliser';
import type { DeliveryOp, DeliveryOpType } from './ops';
import { deliveryPlan, type DeliveryPlan } from './plan';
import type { DeliveryContext } from './surfaces';

/**
 * The plan of a run from its agent's stored delivery policy — parsed again, so that policies
 * stored before a field existed get its default — and the run's delivery context.
 */
export function planOf(storedPolicy: unknown, ctx: DeliveryContext): DeliveryPlan {
  return deliveryPlan(parsedPolicy(storedPolicy), ctx);
}

type ParsedPolicy = ReturnType<typeof deliveryPolicySchema.parse>;

/**
 * Parsed policies by the stored object: an agent comes from admission's in-memory catalogue, one
 * object per agent version (an update loads a new one), so each is parsed once, not once per run
 * (the parse showed in the run path's CPU profile, docs/benchmarks.md). Never mutated after parsing.
 */
const parsedPolicies = new WeakMap<object, ParsedPolicy>();

function parsedPolicy(stored: unknown): ParsedPolicy {
  const cached = typeof stored === 'object' && stored !== null ? parsedPolicies.get(stored) : undefined;
  if (cached) {
    return cached;
  }
  const parsed = deliveryPolicySchema.safeParse(stored ?? {});
  const policy = parsed.success ? parsed.data : deliveryPolicySchema.parse({});
  if (typeof stored === 'object' && stored !== null) {
    parsedPolicies.set(stored, policy);
  }
  return policy;
}

/** What other libs may read of a run's delivery. */
export interface RunDeliveryView {
  readonly plan: DeliveryPlan;
  readonly state: NormaliserState;
}

/**
 * The delivery state of one active run, owned here: each result (in the run's acceptance order)
 * goes through the normaliser and the ops come back to be written with the result. A pending
 * coalesced edit is sent by a timer (`onDue`), whose ops the owner writes on its own.
 */
export class RunDelivery implements RunDeliveryView {
  private current: NormaliserState;
  private timer?: NodeJS.Timeout;
  private dueAt: number | null = null;

  constructor(
    readonly plan: DeliveryPlan,
    runId: string,
    /** Called when a pending edit is due: the owner calls `tick()` and writes its ops. */
    private readonly onDue: () => void,
    private readonly clock: () => number = Date.now,
  ) {
    this.current = initialState(runId);
  }

  get state(): NormaliserState {
    return this.current;
  }

  /** A non-terminal result: the ops to write with it. */
  onResult(result: ResultLike): DeliveryOp[] {
    return this.step({ kind: 'result', result });
  }

  /** The run's terminal result and final status: the last ops, written with the end of the run. */
  onEnd(result: ResultLike, status: RunStatus): DeliveryOp[] {
    const ops = this.step({ kind: 'end', result, status });
    this.stop();
    return ops;
  }

  /** One op decided outside the normaliser (an interaction), next in the run's order; none once the run ended. */
  emit(op: DeliveryOpType, payload: Record<string, unknown>, resultSequence: number | null): DeliveryOp[] {
    return this.step({ kind: 'op', op, payload, result_sequence: resultSequence });
  }

  /** The timed flush of a coalesced edit. */
  tick(): DeliveryOp[] {
    return this.step({ kind: 'tick' });
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.dueAt = null;
  }

  private step(input: NormaliserInput): DeliveryOp[] {
    const { state, ops } = normalise(this.plan, this.current, input, this.clock());
    this.current = state;
    this.arm();
    return ops;
  }

  /** One timer at most, for the earliest pending edit. */
  private arm(): void {
    const due = nextDueAt(this.plan, this.current);
    if (due === this.dueAt) {
      return;
    }
    clearTimeout(this.timer);
    this.dueAt = due;
    if (due !== null) {
      this.timer = setTimeout(
        () => {
          this.timer = undefined;
          this.dueAt = null;
          this.onDue();
        },
        Math.max(0, due - this.clock()),
      );
      this.timer.unref();
    }
  }
}
