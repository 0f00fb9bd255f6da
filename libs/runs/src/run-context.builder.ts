import type { AuthorizationSnapshot } from '@libs/authz';
import { deliveryContextOf } from '@libs/delivery';
import type { AgentEntity } from '@libs/persistence';
import type { RunContext } from '@libs/protocol';
import type { EventSubmission } from './event-submission';

export const HOST_NAME = 'runner-host';

/** What the run may reach, decided at admission: the frozen snapshot, the state values, the history position. */
export interface RunAccess {
  snapshot: AuthorizationSnapshot;
  /** The context window of the first granted chat model (docs/protocol.md#the-run-context), null without one. */
  model_context_window_tokens: number | null;
  state: Record<string, Record<string, unknown>>;
  latest_seq: number | null;
}

export interface BuiltContext {
  context: RunContext;
  deadlineAtMs: number | null;
}

/**
 * The Runner Protocol v1 run context for one run (docs/protocol.md#the-run-context). The host never inlines history:
 * `inline_policy` is always current_event. Grants are empty until the authorization snapshot
 * (resources, available_apis, state) is built at admission by the authz layer.
 */
export function buildRunContext(
  runId: string,
  eventId: string,
  sub: EventSubmission,
  agent: AgentEntity,
  access: RunAccess,
): BuiltContext {
  const { snapshot } = access;
  const deadlineAtMs = snapshot.deadline_at_ms;
  const nowMs = Date.now();
  const conv = sub.conversation;
  const context: RunContext = {
    run_id: runId,
    trigger: {
      type: sub.event.event_type,
      source: sub.event.source,
      timestamp: sub.event.event_time ?? Math.floor(nowMs / 1000),
    },
    event: {
      event_id: eventId,
      event_type: sub.event.event_type,
      event_time: sub.event.event_time,
      source: sub.event.source,
      source_event_type: sub.event.source_event_type,
      raw_ref: sub.event.raw_ref
        ? { ref_id: sub.event.raw_ref.ref_id, storage_key: sub.event.raw_ref.storage_key }
        : undefined,
      data: sub.event.data ?? {},
    },
    conversation: conv
      ? {
          conversation_id: conv.conversation_id,
          thread_id: conv.thread_id,
          launcher_type: conv.launcher_type,
          launcher_id: conv.launcher_id,
          sender_id: conv.sender_id ?? sub.actor?.actor_id,
          bot_id: conv.bot_id,
          workspace_id: conv.workspace_id,
          session_id: conv.session_id,
        }
      : undefined,
    actor: sub.actor
      ? {
          actor_type: sub.actor.actor_type,
          actor_id: sub.actor.actor_id,
          actor_name: sub.actor.actor_name,
          metadata: sub.actor.metadata ?? {},
        }
      : undefined,
    subject: sub.subject
      ? { subject_type: sub.subject.subject_type, subject_id: sub.subject.subject_id, data: sub.subject.data ?? {} }
      : undefined,
    input: {
      text: sub.input.text,
      contents: (sub.input.contents ?? []).map((c) => ({
        ...c,
        image_url: c.image_url ? { url: c.image_url.url } : undefined,
      })),
      attachments: sub.input.attachments ?? [],
      interaction: sub.input.interaction,
    },
    // The surface preset named by `delivery.surface`, each field the event sets overriding it.
    delivery: deliveryContextOf(sub.delivery),
    resources: {
      models: snapshot.resources.models,
      tools: snapshot.resources.tools.map((t) => ({
        ...t,
        parameters: t.parameters ?? undefined,
        source_id: t.source_id ?? undefined,
      })),
      knowledge_bases: snapshot.resources.knowledge_bases,
      storage: {
        plugin_storage: 'plugin' in snapshot.storage,
        workspace_storage: 'workspace' in snapshot.storage,
        binding_storage: 'binding' in snapshot.storage,
      },
      platform_capabilities: {},
    },
    context: {
      conversation_id: conv?.conversation_id,
      thread_id: conv?.thread_id,
      latest_cursor: access.latest_seq === null ? undefined : String(access.latest_seq),
      event_seq: undefined,
      transcript_seq: access.latest_seq ?? undefined,
      has_history_before: access.latest_seq !== null,
      inline_policy: {
        mode: 'current_event',
        delivered_count: 0,
        messages_complete: false,
        reason: 'current_event_only',
      },
      available_apis: { ...snapshot.available_apis },
    },
    state: {
      conversation: access.state.conversation ?? {},
      actor: access.state.actor ?? {},
      subject: access.state.subject ?? {},
      runner: access.state.runner ?? {},
    },
    runtime: {
      host: HOST_NAME,
      protocol_version: '1',
      trace_id: runId,
      deadline_at: deadlineAtMs === null ? undefined : deadlineAtMs / 1000,
      locale: sub.locale,
      timezone: sub.timezone,
      metadata: { agent_id: agent.agent_id, model_context_window_tokens: access.model_context_window_tokens },
    },
    config: agent.runner_config,
    metadata: { ...(sub.metadata ?? {}), agent_id: agent.agent_id },
  };
  return { context, deadlineAtMs };
}

/**
 * What the run row keeps of the context (docs/durability.md#what-a-run-row-holds): the resolved
 * delivery context, the conversation and the actor, in their protocol JSON form (unset fields
 * null). They are read back when a restart closes the run's delivery and when an interaction
 * submission becomes a new event of the same conversation, by the same actor; the delivery is
 * resolved from this build's surface presets, so it is kept as resolved rather than rebuilt.
 * The admission unit adds the event's position (`context.event_seq`). Everything else of the
 * context is already stored once — the event, subject and input in the event row (redacted),
 * resources and available APIs in the snapshot (by hash), config in the agent — or was only for
 * the runner, which got it on its stream (state values, history position); no base64 payload is
 * stored.
 */
export function storedContext(context: RunContext): Record<string, unknown> {
  return {
    delivery: asJson(context.delivery),
    conversation: asJson(context.conversation),
    actor: asJson(context.actor),
  };
}

/**
 * A context part as protocol JSON (unset fields null), or null when absent: the value of
 * `JSON.parse(JSON.stringify(part, undefined → null))`, copied without the text in between for
 * the plain JSON a context holds (docs/benchmarks.md#host-cpu-per-run-outside-the-database); a
 * part holding anything else (a `toJSON`, a function, a bigint, a symbol) takes the JSON route.
 */
export function asJson(part: object | undefined): unknown {
  if (!part) {
    return null;
  }
  const copied = plainJson(part);
  return copied !== NOT_PLAIN
    ? copied
    : (JSON.parse(JSON.stringify(part, (_k, v: unknown) => (v === undefined ? null : v))) as unknown);
}

const NOT_PLAIN = Symbol('not plain JSON');

/** The JSON copy of a value of plain JSON (undefined and non-finite numbers as null), or NOT_PLAIN. */
function plainJson(value: unknown): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? (value === 0 ? 0 : value) : null; // -0 is 0 in JSON
    case 'undefined':
      return null;
    case 'object':
      break;
    case 'bigint':
    case 'function':
    case 'symbol':
      return NOT_PLAIN;
  }
  if (value === null) {
    return null;
  }
  if (Array.isArray(value)) {
    const out: unknown[] = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const v = plainJson(value[i]);
      if (v === NOT_PLAIN) {
        return NOT_PLAIN;
      }
      out[i] = v;
    }
    return out;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if ((proto !== Object.prototype && proto !== null) || 'toJSON' in value) {
    return NOT_PLAIN;
  }
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const v = plainJson((value as Record<string, unknown>)[key]);
    if (v === NOT_PLAIN) {
      return NOT_PLAIN;
    }
    if (key === '__proto__') {
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
    } else {
      out[key] = v;
    }
  }
  return out;
}
