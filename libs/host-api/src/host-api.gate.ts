import { Injectable, Logger } from '@nestjs/common';
import { AuditService, type ApiFlag, type AuditRecord, type StorageArea } from '@libs/authz';
import { isFenced } from '@libs/persistence';
import { DomainError, STORAGE_AREAS, STORAGE_AREA_RULE } from '@libs/protocol';
import { RunGrants, type RunGrant } from '@libs/runs';
import { telemetry } from '@libs/telemetry';

const isStorageArea = (area: string): area is StorageArea => (STORAGE_AREAS as readonly string[]).includes(area);

export type ResourceKind = 'model' | 'tool' | 'knowledge_base';

/** What one host API call needs, checked against the run's frozen snapshot. */
export interface CallNeeds {
  action: string;
  run_id: string;
  flag?: ApiFlag;
  resource?: { kind: ResourceKind; id: string; operation: string };
  /** The storage area named by the request; the gate refuses one that is not an area (STORAGE_AREAS). */
  storage?: string;
  /** A conversation the call names; it must be the run's. */
  conversation_id?: string | null;
  /**
   * The call only reads: when allowed, its audit row is written behind its answer (queued before
   * the answer leaves, committed with the writer's next group: docs/durability.md#audit-rows-of-read-calls).
   * Denied and failed calls, and every call that writes, answer only after their row is committed.
   */
  read?: boolean;
  /** For the audit row: the state scope, storage area or resource addressed. */
  scope?: string;
  payload_bytes: number;
  /** Payload limit for this call when it is not the snapshot's general one. */
  max_payload_bytes?: number;
  /**
   * Over the per-run rate the call waits for its turn instead of being refused: for the built-in
   * runner (the in-process adapter), whose loop has no retry policy of its own. A plugin's calls
   * are refused (`rate_limited`, retryable) and the plugin decides when to retry.
   */
  paced?: boolean;
  /**
   * The call writes for the run (state, storage, model usage): its audit row is fenced like its
   * writes, so a process that lost the run leaves no `allowed` row of it
   * (docs/scale-out.md#fenced-host-api-writes). Reads are never fenced.
   */
  writes?: boolean;
}

/** The answer to a call for a run that is not active here or anywhere (also a write refused by its fence). */
function notActive(runId: string): DomainError {
  return new DomainError('not_found', `run ${runId} is not active`, { run_id: runId });
}

/**
 * Who calls, as the adapter knows it: resolves to the caller's plugin id or throws
 * `unauthenticated`. The gRPC adapter checks the plugin token of the call metadata; the
 * in-process adapter names the built-in runner's identity. It runs inside the gate, so a failed
 * authentication is audited like any other denial.
 */
export type Caller = () => Promise<string>;

/**
 * The one gate of every host API call (docs/protocol.md#the-gate), whichever adapter it came through, in this
 * order: authenticated caller → run exists and is active (here or at another process: RunGrants.find) → caller is the run's plugin → API flag
 * or resource+operation granted → scope not crossed → payload size → per-run rate limit → run
 * deadline (a paced call waits for the rate instead, then is checked again). Every call, allowed
 * or denied, is audited. (A gate, not a Nest guard: adapters call it.)
 */
@Injectable()
export class HostApiGate {
  private readonly logger = new Logger('HostApi');

  constructor(
    private readonly grants: RunGrants,
    private readonly audit: AuditService,
  ) {}

  call<T>(caller: Caller, needs: CallNeeds, handler: (run: RunGrant) => Promise<T>): Promise<T> {
    return telemetry.tracing.hostApiCall(needs.run_id, needs.action, () => this.pass(caller, needs, handler));
  }

  private async pass<T>(caller: Caller, needs: CallNeeds, handler: (run: RunGrant) => Promise<T>): Promise<T> {
    // One monotonic clock (ms) for the metric and the audit row's duration.
    const t0 = telemetry.now();
    let pluginId: string | null = null;
    let run: RunGrant | undefined;
    // The run as found (here, or in the database when another process owns it), for the audit
    // row also when the call is denied.
    let found: RunGrant | undefined;
    let passed = false;
    try {
      pluginId = await caller();
      found = await this.find(needs);
      run = this.check(pluginId, needs, found);
      const wait = needs.paced ? run.budget.reserve() : 0;
      if (wait > 0) {
        await new Promise((resolve) => setTimeout(resolve, wait));
        found = await this.find(needs);
        run = this.check(pluginId, needs, found); // the run may have ended (or passed its deadline) meanwhile
      }
      passed = true;
      const result = await handler(run);
      if (needs.read) {
        const commit = this.audit.recordAfterAnswer(this.row(needs, run, pluginId, 'allowed', null, t0));
        if (commit) {
          await commit; // over the bound of rows not yet committed: this one is waited for
        }
      } else {
        await this.audit.record(
          this.row(needs, run, pluginId, 'allowed', null, t0),
          needs.writes ? (run.lease ?? null) : null,
        );
      }
      telemetry.hostApiCall(needs.action, 'ok', t0);
      return result;
    } catch (thrown) {
      // A write refused by the run's fence: the run is no longer running under the lease the call
      // was granted for (ended, or taken over); nothing of the call was written.
      const e = isFenced(thrown) ? notActive(needs.run_id) : thrown;
      const code = e instanceof DomainError ? e.code : 'runtime_error';
      // A refusal is a denial also when the handler makes it (an event of another conversation,
      // a state scope this run has no identity for); other errors of an allowed call are failures.
      const outcome = passed && code !== 'unauthorized' ? 'failed' : 'denied';
      telemetry.hostApiCall(needs.action, code, t0);
      await this.audit
        .record(this.row(needs, run ?? found, pluginId, outcome, code, t0))
        .catch((err: unknown) =>
          this.logger.error({ run_id: needs.run_id, msg: `audit write failed: ${String(err)}` }),
        );
      if (!passed) {
        this.logger.warn({
          run_id: needs.run_id,
          msg: `${needs.action} denied (${code}) for ${pluginId ?? 'unauthenticated caller'}`,
        });
      }
      throw e;
    }
  }

  /** The run the call names, wherever it runs (RunGrants.find); undefined when unknown or not running. */
  private async find(needs: CallNeeds): Promise<RunGrant | undefined> {
    if (!needs.run_id) {
      throw new DomainError('invalid_argument', 'run_id: is required', { field: 'run_id' });
    }
    return this.grants.find(needs.run_id);
  }

  private check(pluginId: string, needs: CallNeeds, run: RunGrant | undefined): RunGrant {
    if (!run?.active) {
      throw notActive(needs.run_id);
    }
    const snapshot = run.snapshot;
    if (run.plugin_id !== pluginId) {
      throw new DomainError('unauthorized', `run ${needs.run_id} belongs to another plugin`);
    }
    if (needs.flag && !snapshot.available_apis[needs.flag]) {
      throw new DomainError('unauthorized', `${needs.flag} is not available to this run`);
    }
    if (needs.resource) {
      const { kind, id, operation } = needs.resource;
      const granted =
        kind === 'model'
          ? snapshot.resources.models.find((m) => m.model_id === id)
          : kind === 'tool'
            ? snapshot.resources.tools.find((t) => t.tool_name === id)
            : snapshot.resources.knowledge_bases.find((k) => k.kb_id === id);
      if (!granted?.operations.includes(operation)) {
        throw new DomainError('unauthorized', `${kind} "${id}" is not granted to this run for ${operation}`);
      }
    }
    if (needs.storage !== undefined) {
      // Before the grant: an area that is not one is the caller's mistake, not a missing grant.
      if (!isStorageArea(needs.storage)) {
        throw new DomainError('invalid_argument', `area: ${STORAGE_AREA_RULE}`, { field: 'area' });
      }
      if (!snapshot.storage[needs.storage]) {
        throw new DomainError('unauthorized', `storage area "${needs.storage}" is not granted to this run`);
      }
    }
    if (needs.conversation_id && needs.conversation_id !== snapshot.scope.conversation_id) {
      throw new DomainError('unauthorized', `conversation ${needs.conversation_id} is not accessible by this run`);
    }
    const limit = needs.max_payload_bytes ?? snapshot.limits.max_payload_bytes;
    if (needs.payload_bytes > limit) {
      throw new DomainError('payload_too_large', `request is ${needs.payload_bytes} bytes; the limit is ${limit}`, {
        limit,
      });
    }
    if (!needs.paced && !run.budget.take()) {
      throw new DomainError('rate_limited', `more than ${snapshot.limits.calls_per_second} host API calls per second`);
    }
    if (snapshot.deadline_at_ms !== null && Date.now() > snapshot.deadline_at_ms) {
      throw new DomainError('deadline_exceeded', 'the run deadline has passed');
    }
    return run;
  }

  /** The call's audit row: names and ids only. */
  private row(
    needs: CallNeeds,
    run: RunGrant | undefined,
    pluginId: string | null,
    outcome: AuditRecord['outcome'],
    errorCode: string | null,
    startedMs: number,
  ): AuditRecord {
    const resource = needs.resource
      ? `${needs.resource.kind}:${needs.resource.id}`
      : needs.storage
        ? `storage:${needs.storage}`
        : null;
    return {
      run_id: String(needs.run_id).slice(0, 64),
      // Also for a denial before the run was checked: the runner the run belongs to, if it is active.
      runner_id: (run ?? (needs.run_id ? this.grants.grant(String(needs.run_id)) : undefined))?.runner_id ?? null,
      plugin_id: pluginId,
      action: needs.action,
      resource: resource?.slice(0, 300) ?? null,
      scope: needs.scope?.slice(0, 300) ?? null,
      outcome,
      error_code: errorCode,
      duration_us: Math.round((telemetry.now() - startedMs) * 1000),
    };
  }
}
