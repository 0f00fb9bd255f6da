import { Logger } from '@nestjs/common';
import type {
  AgentResult,
  ChatMessage,
  HistoryPage,
  HistoryPageRequest,
  JsonObject,
  KnowledgeEntry,
  LocalAgentHostPort,
  ModelCallRequest,
  ModelInvokeResult,
  ModelStreamItem,
  PortLimits,
  RerankItem,
  RerankRequest,
  RunStatusView,
  StateScope,
  SteeringItem,
  SteeringPullRequest,
  ToolDefinition,
  ToolDetail,
} from '@libs/local-agent';
import {
  DomainError,
  chatMessageSchema,
  describeIssues,
  historyPageSchema,
  steeringItemSchema,
  knowledgeEntrySchema,
  toolDetailSchema,
  usageSchema,
} from '@libs/protocol';
import type { z } from 'zod';
import type { HostActions, HostActionName, RequestOf, ResultOf } from '../host-actions';
import type { Caller } from '../host-api.gate';
import { fromStreamItem } from './stream-items';

const logger = new Logger('HostApiInProcess');

/** The request's size as a plugin would have sent it (JSON bytes): the gate's payload limit applies alike. */
const jsonBytes = (req: object): number => Buffer.byteLength(JSON.stringify(req));

/**
 * A host answer in the local agent's shape (@libs/protocol's answer schemas): the service's
 * domain JSON read by the schema the agent's types come from. An answer that does not fit is a
 * host bug, thrown as `runtime_error` naming the field.
 */
function answer<S extends z.ZodType>(schema: S, value: unknown, name: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new DomainError('runtime_error', `host answer ${describeIssues(parsed.error, name)}`, {}, false);
  }
  return parsed.data;
}

/**
 * What the port throws: the gate's and services' protocol errors as they are; anything else (a
 * declared action not served yet, a bug) as `runtime_error`, logged here since no transport will.
 */
function portError(e: unknown, runId: string): DomainError {
  if (e instanceof DomainError) {
    return e;
  }
  const message = e instanceof Error ? e.message : String(e);
  logger.warn({ run_id: runId, msg: `in-process host API call failed: ${message}` });
  return new DomainError('runtime_error', message, {}, false);
}

/**
 * The in-process adapter of the host API: the local agent's port for one run, bound to that run
 * and to the built-in runner's identity. Every method is one action of the same table the gRPC
 * adapter serves, through the same gate (authorisation against the run's frozen snapshot,
 * payload limit, rate, deadline, audit row) — only the wire conversion is missing, since both
 * sides speak domain JSON.
 */
export class InProcessHostPort implements LocalAgentHostPort {
  private readonly caller: Caller;

  constructor(
    private readonly actions: HostActions,
    private readonly runId: string,
    pluginId: string,
    readonly signal: AbortSignal,
    private readonly sink: (result: AgentResult) => void,
    readonly skill_roots?: readonly string[],
    readonly limits?: PortLimits,
    /** The run may request interactions (its frozen grant; docs/interactions.md#who-may-ask). */
    readonly interactions = false,
  ) {
    const identity = Promise.resolve(pluginId);
    this.caller = () => identity;
  }

  private call<A extends HostActionName>(name: A, req: RequestOf<A>): Promise<ResultOf<A>> {
    // Paced: over the per-run rate a call of the built-in runner waits for its turn instead of
    // failing the run (its loop has no retry policy); the rate still bounds how fast a model can
    // drive tools through it.
    return this.actions
      .execute(this.caller, name, this.runId, req, jsonBytes(req), { paced: true })
      .catch((e: unknown) => {
        throw portError(e, this.runId);
      });
  }

  async invokeModel(req: ModelCallRequest): Promise<ModelInvokeResult> {
    const out = await this.call('model.invoke', modelCall(req));
    return {
      message: answer(chatMessageSchema, out.message, 'message'),
      usage: out.usage ? answer(usageSchema, out.usage, 'usage') : null,
    };
  }

  async *streamModel(req: ModelCallRequest): AsyncIterable<ModelStreamItem> {
    const items = await this.call('model.stream', modelCall(req));
    try {
      // The consumer's return() ends this loop, which returns the provider stream (request aborted, call metered).
      for await (const item of items) {
        yield fromStreamItem(item);
      }
    } catch (e) {
      throw portError(e, this.runId);
    }
  }

  async countTokens(req: { model_id: string; messages: ChatMessage[]; tools?: ToolDefinition[] }): Promise<number> {
    const out = await this.call('model.count_tokens', {
      model_id: req.model_id,
      messages: req.messages,
      tools: req.tools ?? [],
    });
    return out.tokens;
  }

  async rerank(req: RerankRequest): Promise<RerankItem[]> {
    const out = await this.call('model.rerank', {
      model_id: req.model_id,
      query: req.query,
      documents: req.documents,
      top_k: req.top_k,
    });
    return out.results;
  }

  async getToolDetail(toolName: string): Promise<ToolDetail> {
    const out = await this.call('tool.detail', { tool_name: toolName });
    return answer(toolDetailSchema, out.tool, 'tool');
  }

  async callTool(toolName: string, parameters: JsonObject): Promise<unknown> {
    return (await this.call('tool.call', { tool_name: toolName, parameters })).result;
  }

  async retrieveKnowledge(req: { kb_id: string; query_text: string; top_k?: number }): Promise<KnowledgeEntry[]> {
    const out = await this.call('knowledge.retrieve', {
      kb_id: req.kb_id,
      query_text: req.query_text,
      top_k: req.top_k,
    });
    return answer(knowledgeEntrySchema.array(), out.results, 'results');
  }

  async historyPage(req: HistoryPageRequest): Promise<HistoryPage> {
    return answer(historyPageSchema, await this.call('history.page', { ...req }), 'page');
  }

  async promptGet(): Promise<ChatMessage[]> {
    return (await this.call('prompt.get', {})).prompt;
  }

  async stateGet(scope: StateScope, key: string): Promise<unknown> {
    // Absent and JSON null read alike, as on gRPC (an unset value).
    return (await this.call('state.get', { scope, key })).value ?? undefined;
  }

  async stateSet(scope: StateScope, key: string, value: unknown): Promise<void> {
    await this.call('state.set', { scope, key, value });
  }

  async steeringPull(req: SteeringPullRequest): Promise<SteeringItem[]> {
    const out = await this.call('steering.pull', { mode: req.mode, limit: req.limit, wait_ms: req.wait_ms });
    return answer(steeringItemSchema.array(), out.items, 'items');
  }

  async runGet(): Promise<RunStatusView> {
    const out = await this.call('run.get', {});
    return { status: out.status, cancel_requested: out.cancel_requested };
  }

  emit(result: AgentResult): void {
    this.sink(result);
  }
}

function modelCall(req: ModelCallRequest) {
  return {
    model_id: req.model_id,
    messages: req.messages,
    tools: req.tools,
    remove_think: req.remove_think,
    extra_args: req.extra_args,
  };
}
