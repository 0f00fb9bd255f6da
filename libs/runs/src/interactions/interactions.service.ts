import { randomUUID } from 'node:crypto';
import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import {
  DeliveryService,
  OutboxStore,
  deliveryId,
  idempotencyKey,
  planOf,
  type DeliveryContext,
  type DeliveryOp,
  type DeliveryOpType,
} from '@libs/delivery';
import {
  ELICITATION_ORIGIN,
  InteractionsRepository,
  elicitationRequest,
  elicitationResult,
  hashCallbackToken,
  interactionRequestSchema,
  newCallbackToken,
  isCallbackTokenShape,
  parseInteractionRequest,
  presentationFor,
  submissionText,
  validateSubmission,
  type InteractionRequest,
  type InteractionSubmission,
  type SubmissionInput,
} from '@libs/interactions';
import {
  AgentsRepository,
  RunsRepository,
  isFenced,
  outboxLastUnit,
  type InteractionEntity,
  type InteractionFence,
  type InteractionStatus,
  type JsonObject,
} from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { ElicitationBroker, type ElicitationParams, type ElicitResult } from '@libs/resources';
import { AdmissionService } from '../admission.service';
import type { ActiveRun, ActiveRunView } from '../active-run';
import { ActiveRuns } from '../active-runs';
import type { EventSubmission } from '../event-submission';
import { RunSteps } from '../run-steps';
import type { ResultView } from '../run-stream.bus';

/** How often pending interactions past their expiry are looked for, and how many per batch. */
export const SWEEP_INTERVAL_MS = 15_000;
const SWEEP_BATCH = 100;
const SWEEP_MAX_BATCHES = 10;

/** A stored interaction request (written after `parseInteractionRequest`), read back through its schema. */
function storedRequest(stored: JsonObject): InteractionRequest {
  const parsed = interactionRequestSchema.safeParse(stored);
  if (!parsed.success) {
    throw new Error(`stored interaction request does not match its schema: ${parsed.error.message}`);
  }
  return parsed.data;
}

/** What the run path does with an `action.requested` result. */
export interface ActionOutcome {
  /** Delivery ops to write with the result. */
  ops: DeliveryOp[];
  /** The interaction row being written; the result is published once both committed. */
  written: Promise<unknown> | null;
  /** Why the run fails (the request broke a rule; the field is named); null when accepted or ignored. */
  refused: string | null;
}

export interface SubmitOutcome {
  id: string;
  interaction_id: string;
  status: 'submitted';
  event_id: string;
  /** What admission did with the `interaction.submitted` event: started, steered, queued, or failed; `delivered` for an MCP elicitation (answered inside the waiting tool call). */
  disposition: string;
  run_id: string | null;
  error?: string;
}

export interface InteractionView {
  id: string;
  interaction_id: string;
  run_id: string;
  agent_id: string;
  conversation_id: string | null;
  thread_id: string | null;
  kind: string;
  title: string;
  status: InteractionStatus;
  status_reason: string | null;
  created_at: string;
  expires_at: string;
  age_ms: number;
  submitted_at: string | null;
  submission_event_id: string | null;
}

function withoutNulls<T extends object>(o: unknown): T | undefined {
  if (!o || typeof o !== 'object') {
    return undefined;
  }
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined)) as T;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** What every accepted submission answers, whichever way it then goes (a new event, or an MCP server). */
const submitted = (row: InteractionEntity, eventId: string) => ({
  id: row.id,
  interaction_id: row.interaction_id,
  status: 'submitted' as const,
  event_id: eventId,
});

/**
 * Structured interactions (docs/interactions.md): a run's request becomes a row and a delivery op;
 * a platform's submission — checked against the one-time token and the request's fields — is
 * claimed by one conditional update and admitted as an `interaction.submitted` event of the
 * conversation; expiry is a bounded sweep (and a check on every read). Nothing but the row is
 * held while a person answers, so restarts lose nothing.
 */
@Injectable()
export class InteractionsService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Interactions');
  /** Interaction ids each live run already requested (the table's unique index is the backstop). */
  private readonly requested = new WeakMap<ActiveRunView, Set<string>>();
  private timer?: NodeJS.Timeout;
  private sweeping = false;
  /**
   * MCP elicitations waiting in this process for their answer, by interaction row id (null: it
   * ended unanswered), with the fence their answer is claimed under (the asking run's lease).
   */
  private readonly waiting = new Map<
    string,
    { answer: (s: InteractionSubmission | null) => void; fence: InteractionFence }
  >();

  constructor(
    private readonly repo: InteractionsRepository,
    private readonly active: ActiveRuns,
    private readonly steps: RunSteps,
    private readonly deliveries: DeliveryService,
    private readonly outbox: OutboxStore,
    private readonly runs: RunsRepository,
    private readonly agents: AgentsRepository,
    private readonly admission: AdmissionService,
    private readonly broker: ElicitationBroker,
  ) {}

  onApplicationBootstrap(): void {
    // docs/interactions.md#mcp-elicitation: MCP servers' questions become interactions of the run.
    this.broker.requester = { request: (runId, params, signal) => this.elicit(runId, params, signal) };
    // Expiries that fell due while the host was down fire now; then periodically.
    void this.sweep();
    this.timer = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
    this.broker.requester = null;
  }

  /**
   * An MCP server's `elicitation/create` during a tool call of `runId`: a form interaction of the
   * run, delivered like a runner's; the answer goes back to the server (accept with the values, or
   * decline). It lives as long as the tool call that asked: when that call ends first (its
   * timeout, the run's end) the interaction is closed `expired` and a later submission gets 409.
   */
  async elicit(runId: string, params: ElicitationParams, signal: AbortSignal): Promise<ElicitResult> {
    const run = this.active.get(runId);
    const p: Record<string, unknown> = { ...params };
    if (!run || run.ended || !(run.snapshot.interactions ?? []).includes('request') || p.mode === 'url') {
      return { action: 'decline' };
    }
    const now = Date.now();
    const checked = parseInteractionRequest(elicitationRequest(p, `elicitation:${randomUUID()}`), now);
    if (!checked.ok) {
      this.logger.warn({ run_id: runId, msg: `elicitation declined: ${checked.reason}` });
      return { action: 'decline' };
    }
    const { entity, payload } = this.pendingInteraction(
      run,
      checked.request,
      checked.expires_at_ms,
      now,
      ELICITATION_ORIGIN,
    );
    // A call inside the running run (docs/scale-out.md#fenced-host-api-writes): a process that lost
    // the run, or a run that ended, creates nothing and the server is declined.
    const fence: InteractionFence = { lease: run.lease, kind: 'call' };
    try {
      await this.repo.insert(entity, fence);
    } catch (e) {
      if (isFenced(e)) {
        this.logger.warn({ run_id: runId, msg: `elicitation declined: ${e.message}` });
        return { action: 'decline' };
      }
      throw e;
    }
    const answer = new Promise<InteractionSubmission | null>((resolve) => {
      const done = (s: InteractionSubmission | null) => {
        signal.removeEventListener('abort', ended);
        this.waiting.delete(entity.id);
        resolve(s);
      };
      const ended = () => {
        done(null);
        const why = signal.reason instanceof Error ? signal.reason.message : 'the tool call that asked has ended';
        // The run's fence, not the call's: the run may have ended (that is often why the call did).
        void this.repo
          .closeFenced(entity.id, 'expired', why, Date.now(), { lease: run.lease, kind: 'run' })
          .then((closed) => (closed ? this.emitOutcome(entity, 'expired', { reason: why }) : undefined))
          .catch((e: unknown) =>
            // Fenced: the run's new owner (or the expiry sweep, at its time) closes it.
            this.logger.warn({ run_id: runId, msg: `closing elicitation failed: ${String(e)}` }),
          );
      };
      this.waiting.set(entity.id, { answer: done, fence });
      signal.addEventListener('abort', ended, { once: true });
      if (signal.aborted) {
        ended();
      }
    });
    await this.emitLive(run, 'interaction.request', payload);
    return elicitationResult(await answer);
  }

  /**
   * An `action.requested` result of an active run. Only `interaction.requested` executes, when the
   * run's snapshot allows it; any other action is recorded (as the result) and ignored. The
   * runner's `target` is ignored: the run's frozen reply target is used.
   */
  onAction(run: ActiveRunView, row: ResultView): ActionOutcome {
    const data = row.data;
    if (data.action !== 'interaction.requested') {
      this.logger.log({ run_id: run.run_id, msg: `action ${String(data.action)} recorded and ignored` });
      return { ops: [], written: null, refused: null };
    }
    if (!(run.snapshot.interactions ?? []).includes('request')) {
      return {
        ops: [],
        written: null,
        refused:
          'interaction.requested: not allowed in this run (the runner must declare capabilities.interactions and permissions.interactions ["request"], and the agent\'s delivery policy enable_interactions must be true)',
      };
    }
    const now = Date.now();
    const checked = parseInteractionRequest(data.payload, now);
    if (!checked.ok) {
      return { ops: [], written: null, refused: `interaction.requested: ${checked.reason}` };
    }
    const request = checked.request;
    const seen = this.requested.get(run) ?? new Set<string>();
    this.requested.set(run, seen);
    if (seen.has(request.interaction_id)) {
      return {
        ops: [],
        written: null,
        refused: `interaction.requested: payload.interaction_id: "${request.interaction_id}" was already requested in this run`,
      };
    }
    seen.add(request.interaction_id);
    const { entity, payload } = this.pendingInteraction(run, request, checked.expires_at_ms, now);
    const ops = run.delivery?.emit('interaction.request', payload, row.sequence) ?? [];
    // The run's fence, in the row's own transaction: a process that lost the run writes no request
    // (FencedError: the lifecycle drops the run, as for its result row).
    const fence: InteractionFence = { lease: run.lease, kind: 'run' };
    const written = this.repo.insert(entity, fence).then(() => {
      void this.supersedeOthers(entity, fence).catch((e: unknown) =>
        this.logger.error({ run_id: run.run_id, msg: `superseding failed: ${String(e)}` }),
      );
    });
    return { ops, written, refused: null };
  }

  /**
   * A new pending interaction of a live run — a runner's `interaction.requested` or an MCP server's
   * elicitation (`origin`) — with its one-time callback token, addressed to the run's frozen
   * surface and reply target; and the `interaction.request` payload that delivers it (the token
   * in clear only there).
   */
  private pendingInteraction(
    run: Pick<ActiveRunView, 'run_id' | 'agent_id' | 'runner_id' | 'snapshot' | 'delivery'>,
    request: InteractionRequest,
    expiresAtMs: number,
    now: number,
    origin?: string,
  ): { entity: InteractionEntity; payload: Record<string, unknown> } {
    const plan = run.delivery?.plan ?? null;
    const token = newCallbackToken();
    const scope = run.snapshot.scope;
    const target = { surface: plan?.surface ?? 'api', reply_target: plan?.reply_target ?? null };
    const entity: InteractionEntity = {
      id: randomUUID(),
      interaction_id: request.interaction_id,
      run_id: run.run_id,
      agent_id: run.agent_id,
      runner_id: run.runner_id,
      conversation_id: scope.conversation_id,
      thread_id: scope.thread_id,
      actor_id: scope.actor_id,
      kind: request.kind,
      status: 'pending',
      status_reason: null,
      request,
      delivery_target: origin === undefined ? target : { ...target, origin },
      callback_token_hash: token.hash,
      replaces_id: null,
      expires_at: expiresAtMs,
      submission: null,
      submitted_at: null,
      submission_event_id: null,
      created_at: now,
      updated_at: now,
    };
    const payload: Record<string, unknown> = {
      id: entity.id,
      interaction_id: request.interaction_id,
      kind: request.kind,
      presentation: presentationFor(request, plan?.interactions),
      request,
      fallback_text: request.fallback_text,
      callback_token: token.token,
      expires_at: Math.floor(expiresAtMs / 1000),
      submit_path: `/v1/interactions/${entity.id}/submit`,
      ...(origin === undefined ? {} : { origin }),
    };
    return { entity, payload };
  }

  /**
   * A platform's submission (HTTP, or `POST /v1/events` with `interaction.submitted`): the token
   * names the interaction (`id`, when given, must be that one); a used, expired or forged token
   * changes nothing. Exactly one valid submission wins the conditional update. `seesRun` is the
   * caller's workspace filter (docs/tenancy.md#isolation): an interaction of a run it may not see
   * answers 404 like a missing one, and nothing changes.
   */
  async submit(
    id: string | null,
    input: SubmissionInput & { callback_token?: unknown },
    agentId: string | null = null,
    seesRun: (runId: string) => Promise<boolean> = () => Promise.resolve(true),
  ): Promise<SubmitOutcome> {
    if (!isCallbackTokenShape(input.callback_token)) {
      throw new DomainError('unauthorized', 'callback_token: not a valid interaction token', {
        field: 'callback_token',
      });
    }
    if (id !== null) {
      const named = await this.repo.get(id);
      if (!named || !(await seesRun(named.run_id))) {
        throw new DomainError('not_found', `interaction ${id} not found`);
      }
    }
    const row = await this.repo.byTokenHash(hashCallbackToken(input.callback_token));
    if (row && id === null && !(await seesRun(row.run_id))) {
      throw new DomainError('not_found', 'callback_token: interaction not found', { field: 'callback_token' });
    }
    if (!row || (id !== null && row.id !== id)) {
      throw new DomainError('unauthorized', 'callback_token: does not match this interaction', {
        field: 'callback_token',
      });
    }
    if (agentId !== null && row.agent_id !== agentId) {
      throw new DomainError('unauthorized', 'agent_id: the interaction belongs to another agent', {
        field: 'agent_id',
      });
    }
    const now = Date.now();
    await this.refuseUnlessPending(row, now);
    // Stored as parsed when the runner asked (interactionRequestSchema): reading it back is a parse, not a cast.
    const request = storedRequest(row.request);
    const checked = validateSubmission(request, input);
    if (!checked.ok) {
      throw new DomainError('invalid_argument', checked.reason, { field: checked.field });
    }
    const submission: InteractionSubmission = {
      interaction_id: row.interaction_id,
      action_id: checked.action_id,
      values: checked.values,
      submitted_at: Math.floor(now / 1000),
    };
    const eventId = `interaction:${row.id}`;
    const elicitation = (row.delivery_target as { origin?: unknown }).origin === ELICITATION_ORIGIN;
    const waiter = elicitation ? this.waiting.get(row.id) : undefined;
    if (!(await this.claim(row, { ...submission }, eventId, now, waiter?.fence ?? null))) {
      const current = (await this.repo.get(row.id)) ?? row;
      await this.refuseUnlessPending(current, Date.now());
      throw new DomainError('conflict', `interaction ${row.id}: already answered`, { status: current.status });
    }
    await this.emitOutcome(row, 'submitted', { action_id: checked.action_id });
    if (elicitation) {
      // The answer goes to the MCP server that asked, inside the tool call still waiting for it.
      const base = submitted(row, eventId);
      if (!waiter) {
        return { ...base, disposition: 'failed', run_id: row.run_id, error: 'the tool call that asked has ended' };
      }
      waiter.answer(submission);
      return { ...base, disposition: 'delivered', run_id: row.run_id };
    }
    return this.admit(row, request, submission, eventId);
  }

  /**
   * `pending` → `submitted`. An elicitation waiting here is answered by this process for its run:
   * claimed behind the run's fence (a process that lost the run, or a run that ended, answers
   * nothing: 409, the waiting call is closed). Any other submission is the platform's, taken by
   * whichever process it reaches (it becomes a new event), so it is not fenced.
   */
  private async claim(
    row: InteractionEntity,
    submission: JsonObject,
    eventId: string,
    now: number,
    fence: InteractionFence | null,
  ): Promise<boolean> {
    if (!fence) {
      return this.repo.claim(row.id, submission, eventId, now);
    }
    try {
      return await this.repo.claimFenced(row.id, submission, eventId, now, fence);
    } catch (e) {
      if (!isFenced(e)) {
        throw e;
      }
      this.waiting.get(row.id)?.answer(null);
      throw new DomainError('conflict', `interaction ${row.id}: the run that asked is no longer active here`, {
        status: row.status,
      });
    }
  }

  /** The submission as a new event of the conversation (steered into its active run when there is one). */
  private async admit(
    row: InteractionEntity,
    request: InteractionRequest,
    submission: InteractionSubmission,
    eventId: string,
  ): Promise<SubmitOutcome> {
    const ctx = ((await this.runs.get(row.run_id))?.context ?? {}) as Record<string, unknown>;
    // The stored context's delivery was the admitted event's (checked by its schema then).
    const delivery = withoutNulls<NonNullable<EventSubmission['delivery']>>(ctx.delivery) ?? { surface: 'api' };
    const target = row.delivery_target as { surface?: string; reply_target?: Record<string, unknown> | null };
    const sub: EventSubmission = {
      agent_id: row.agent_id,
      event: {
        event_id: eventId,
        event_type: 'interaction.submitted',
        source: 'platform',
        source_event_type: 'interaction.submitted',
        data: { id: row.id, interaction_id: row.interaction_id },
      },
      conversation: withoutNulls(ctx.conversation),
      actor: withoutNulls(ctx.actor),
      subject: {
        subject_type: 'interaction',
        subject_id: row.interaction_id,
        data: { action_id: submission.action_id },
      },
      input: { text: submissionText(request, submission), interaction: { ...submission } },
      // The run's frozen surface and reply target.
      delivery: {
        ...delivery,
        surface: target.surface ?? delivery.surface,
        ...(target.reply_target ? { reply_target: target.reply_target } : {}),
      },
    };
    const base = submitted(row, eventId);
    try {
      const a = await this.admission.submit(sub, null);
      return { ...base, disposition: a.disposition, run_id: a.run_id };
    } catch (e) {
      if (e instanceof DomainError) {
        // The submission stands; the event is recorded as failed (e.g. the runner is not connected).
        this.logger.warn({ msg: `interaction ${row.id}: submission event not started: ${e.message}` });
        return { ...base, disposition: 'failed', run_id: (e.details.run_id as string) ?? null, error: e.message };
      }
      throw e;
    }
  }

  /** 409 for an interaction no longer pending; one past its expiry is expired first. */
  private async refuseUnlessPending(row: InteractionEntity, now: number): Promise<void> {
    if (row.status === 'pending' && row.expires_at <= now) {
      await this.expire(row, now);
      throw new DomainError('conflict', `interaction ${row.id}: expired`, { status: 'expired' });
    }
    if (row.status !== 'pending') {
      throw new DomainError('conflict', `interaction ${row.id}: already ${row.status}`, { status: row.status });
    }
  }

  private async expire(row: InteractionEntity, now: number): Promise<void> {
    if (await this.repo.close(row.id, 'expired', `expired at ${iso(row.expires_at)}`, now)) {
      this.waiting.get(row.id)?.answer(null); // an elicitation past its expiry: the server gets `cancel`
      await this.emitOutcome(row, 'expired', {});
    }
  }

  /**
   * A new request supersedes the pending requests of earlier runs of the same conversation — a
   * write made for the new request's run, behind its fence (a FencedError stops it).
   */
  private async supersedeOthers(row: InteractionEntity, fence: InteractionFence): Promise<void> {
    if (row.conversation_id === null) {
      return;
    }
    const others = await this.repo.pendingOfConversation(row.agent_id, row.conversation_id, row.thread_id, row.run_id);
    for (const other of others) {
      if (await this.repo.closeFenced(other.id, 'superseded', `superseded by ${row.id}`, Date.now(), fence)) {
        await this.emitOutcome(other, 'superseded', { superseded_by: row.id });
      }
    }
  }

  /** Bounded: a few batches per tick; what is left waits for the next one. */
  async sweep(): Promise<number> {
    if (this.sweeping) {
      return 0;
    }
    this.sweeping = true;
    let expired = 0;
    try {
      for (let i = 0; i < SWEEP_MAX_BATCHES; i++) {
        const now = Date.now();
        const due = await this.repo.dueForExpiry(now, SWEEP_BATCH);
        for (const row of due) {
          await this.expire(row, now);
          expired++;
        }
        if (due.length < SWEEP_BATCH) {
          break;
        }
      }
    } catch (e) {
      this.logger.error({ msg: `interaction expiry sweep failed: ${e instanceof Error ? e.message : String(e)}` });
    } finally {
      this.sweeping = false;
    }
    return expired;
  }

  /**
   * An `interaction.update` op on the requesting run's deliveries: through its live delivery
   * while it runs here, else appended after its last op (once its own end is written).
   */
  /** An op through a live run's delivery (in its op order); false when the run has none here. */
  private async emitLive(run: ActiveRun, op: DeliveryOpType, payload: Record<string, unknown>): Promise<boolean> {
    if (run.ended || !run.delivery) {
      return false;
    }
    const delivery = run.delivery;
    const ops = delivery.emit(op, payload, null);
    if (ops.length === 0) {
      return false;
    }
    const written = this.outbox.write(this.deliveries.rows(run.agent_id, delivery.plan, ops));
    this.steps.enqueue(run, async () => {
      await written;
      this.deliveries.published(ops, delivery.plan);
    });
    await written;
    return true;
  }

  private async emitOutcome(row: InteractionEntity, status: InteractionStatus, extra: Record<string, unknown>) {
    const payload = { id: row.id, interaction_id: row.interaction_id, status, ...extra };
    const run = this.active.get(row.run_id);
    if (run && (await this.emitLive(run, 'interaction.update', payload))) {
      return;
    }
    if (run) {
      await run.finished;
    }
    const stored = await this.runs.get(row.run_id);
    const agent = await this.agents.get(row.agent_id);
    const ctx = (stored?.context as { delivery?: DeliveryContext } | null)?.delivery;
    const plan = planOf(
      agent?.delivery_policy,
      ctx ?? {
        surface: 'api',
        supports_streaming: true,
        supports_edit: false,
        supports_reaction: false,
        platform_capabilities: {},
      },
    );
    // Two outcomes of one run at once may race for the next sequence: the unique index decides, the loser retries.
    for (let attempt = 0; attempt < 5; attempt++) {
      const last = (await this.outbox.hot.read(outboxLastUnit(row.run_id, 1)))[0]?.sequence ?? 0;
      const sequence = last + 1;
      const op: DeliveryOp = {
        delivery_id: deliveryId(row.run_id, sequence),
        run_id: row.run_id,
        sequence,
        op: 'interaction.update',
        idempotency_key: idempotencyKey(row.run_id, sequence),
        reply_target: (row.delivery_target.reply_target ?? null) as Record<string, unknown> | null,
        target_delivery_id: null,
        result_sequence: null,
        payload,
        created_at: Date.now(),
      };
      try {
        await this.outbox.write(this.deliveries.rows(row.agent_id, plan, [op]));
      } catch (e) {
        this.logger.warn({ run_id: row.run_id, msg: `interaction.update op retried: ${String(e)}` });
        continue;
      }
      this.deliveries.published([op], plan);
      return;
    }
    this.logger.error({ run_id: row.run_id, msg: `interaction.update op for ${row.id} not written` });
  }

  async list(statuses: InteractionStatus[], limit: number): Promise<InteractionView[]> {
    const now = Date.now();
    return (await this.repo.page(statuses, null, limit)).map((r) => ({
      id: r.id,
      interaction_id: r.interaction_id,
      run_id: r.run_id,
      agent_id: r.agent_id,
      conversation_id: r.conversation_id,
      thread_id: r.thread_id,
      kind: r.kind,
      title: typeof r.request.title === 'string' ? r.request.title : '',
      status: r.status,
      status_reason: r.status_reason,
      created_at: iso(r.created_at),
      expires_at: iso(r.expires_at),
      age_ms: now - r.created_at,
      submitted_at: r.submitted_at === null ? null : iso(r.submitted_at),
      submission_event_id: r.submission_event_id,
    }));
  }
}
