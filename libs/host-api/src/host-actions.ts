import { Injectable } from '@nestjs/common';
import type { StorageArea } from '@libs/authz';
import type { PageRequest } from '@libs/conversations';
import {
  KnowledgeService,
  ModelsService,
  ToolsService,
  type CountTokensInput,
  type ModelCallInput,
  type RerankCallInput,
  type ResourceCall,
  type RetrieveRequest,
} from '@libs/resources';
import { SteeringService, WorkspaceQuotaGate, type RunGrant } from '@libs/runs';
import { ContextApiService } from './context-api.service';
import { HostApiGate, type CallNeeds, type Caller } from './host-api.gate';
import { StorageApiService } from './storage-api.service';

type Json = Record<string, unknown>;

/*
 * The host API's actions in domain terms (docs/protocol.md#host-api): what each request carries once an adapter
 * converted it (no run_id: the adapter names the run), and what each one needs of the run's
 * frozen grants. Both adapters — gRPC for plugins, in-process for the built-in runner — call the
 * same table through the same gate, so authorisation, audit, limits and rate are one thing.
 */
export interface HistoryPageInput extends PageRequest {
  conversation_id?: string;
}
export interface HistorySearchInput {
  query: string;
  filters?: Json;
  top_k?: number;
}
export interface EventPageInput {
  conversation_id?: string;
  event_types: string[];
  before_cursor?: string;
  limit?: number;
}
export interface StateKeyInput {
  scope: string;
  key: string;
}
export interface StateListInput {
  scope: string;
  prefix?: string;
  limit?: number;
}
export interface StorageKeyInput {
  area: StorageArea;
  key: string;
}
export interface StorageListInput {
  area: StorageArea;
  prefix?: string;
  limit?: number;
}
export interface SteeringPullInput {
  mode?: string;
  limit?: number;
  wait_ms?: number;
}

/** What an action needs besides the run, the action name and the payload size. */
export type ActionNeeds = Omit<CallNeeds, 'action' | 'run_id' | 'payload_bytes'>;

interface ActionSpec<Req, Res> {
  needs(req: Req): ActionNeeds;
  run(run: RunGrant, req: Req): Promise<Res>;
}

const action = <Req, Res>(
  needs: (req: Req) => ActionNeeds,
  run: (run: RunGrant, req: Req) => Promise<Res>,
): ActionSpec<Req, Res> => ({ needs, run });

const model = (id: string, operation: string): ActionNeeds => ({ resource: { kind: 'model', id, operation } });
const tool = (id: string, operation: string): ActionNeeds => ({ resource: { kind: 'tool', id, operation } });
const storage = (area: StorageArea, key?: string): ActionNeeds => ({ flag: 'storage', storage: area, scope: key });

/** The run-side handle a resource operation gets: its abort signal and deadline. */
const callOf = (run: RunGrant): ResourceCall => ({
  run_id: run.run_id,
  signal: run.signal,
  deadline_at_ms: run.snapshot.deadline_at_ms,
  interactions: (run.snapshot.interactions ?? []).includes('request'),
});
const grantedTool = (run: RunGrant, name: string) => run.snapshot.resources.tools.find((t) => t.tool_name === name)!;

/**
 * The action table: action → needed grant, resource and limits, and the one service call that
 * serves it. Adding an action here serves it on both adapters.
 */
@Injectable()
export class HostActions {
  constructor(
    private readonly gate: HostApiGate,
    private readonly context: ContextApiService,
    private readonly storageApi: StorageApiService,
    private readonly models: ModelsService,
    private readonly tools: ToolsService,
    private readonly knowledge: KnowledgeService,
    private readonly steering: SteeringService,
    private readonly quotas: WorkspaceQuotaGate,
  ) {}

  /** docs/tenancy.md#quotas: a model call of a workspace that spent its day's tokens answers 429. */
  private tokensLeft(run: RunGrant): Promise<void> {
    return this.quotas.modelCall(run.workspace_id ?? 'default');
  }

  readonly table = {
    'model.invoke': action(
      (r: ModelCallInput) => model(r.model_id, 'invoke'),
      async (run, r) => {
        await this.tokensLeft(run);
        return this.models.invoke(callOf(run), r);
      },
    ),
    // Resolves once the gate passed (and audited); the chunks then flow as the provider sends them.
    'model.stream': action(
      (r: ModelCallInput) => model(r.model_id, 'stream'),
      async (run, r) => {
        await this.tokensLeft(run);
        return this.models.stream(callOf(run), r);
      },
    ),
    'model.count_tokens': action(
      (r: CountTokensInput) => model(r.model_id, 'count_tokens'),
      (run, r) => this.models.countTokens(callOf(run), r),
    ),
    'model.rerank': action(
      (r: RerankCallInput) => model(r.model_id, 'rerank'),
      async (run, r) => {
        await this.tokensLeft(run);
        return this.models.rerank(callOf(run), r);
      },
    ),
    'tool.detail': action(
      (r: { tool_name: string }) => tool(r.tool_name, 'detail'),
      async (run, r) => ({ tool: await this.tools.detail(callOf(run), grantedTool(run, r.tool_name)) }),
    ),
    'tool.call': action(
      (r: { tool_name: string; parameters: Json }) => tool(r.tool_name, 'call'),
      async (run, r) => ({ result: await this.tools.call(callOf(run), grantedTool(run, r.tool_name), r.parameters) }),
    ),
    'knowledge.retrieve': action(
      (r: RetrieveRequest): ActionNeeds => ({
        resource: { kind: 'knowledge_base', id: r.kb_id, operation: 'retrieve' },
      }),
      async (run, r) => ({ results: await this.knowledge.retrieve(callOf(run), r) }),
    ),
    'history.page': action(
      (r: HistoryPageInput): ActionNeeds => ({ flag: 'history_page', conversation_id: r.conversation_id }),
      (run, r) => this.context.historyPage(run, r),
    ),
    'history.search': action(
      (r: HistorySearchInput): ActionNeeds => {
        const conversation: unknown = r.filters?.conversation_id;
        return {
          flag: 'history_search',
          conversation_id: typeof conversation === 'string' ? conversation : undefined,
        };
      },
      (run, r) => this.context.historySearch(run, r.query, r.top_k),
    ),
    'event.get': action(
      (_r: { event_id: string }): ActionNeeds => ({ flag: 'event_get' }),
      async (run, r) => ({ event: await this.context.eventGet(run, r.event_id) }),
    ),
    'event.page': action(
      (r: EventPageInput): ActionNeeds => ({ flag: 'event_page', conversation_id: r.conversation_id }),
      (run, r) => this.context.eventPage(run, r.event_types, r.before_cursor, r.limit),
    ),
    'state.get': action(
      (r: StateKeyInput): ActionNeeds => ({ flag: 'state', scope: r.scope }),
      (run, r) => this.context.stateGet(run, r.scope, r.key),
    ),
    'state.set': action(
      (r: StateKeyInput & { value: unknown }): ActionNeeds => ({ flag: 'state', scope: r.scope }),
      (run, r) => this.context.stateSet(run, r.scope, r.key, r.value),
    ),
    'state.delete': action(
      (r: StateKeyInput): ActionNeeds => ({ flag: 'state', scope: r.scope }),
      (run, r) => this.context.stateDelete(run, r.scope, r.key),
    ),
    'state.list': action(
      (r: StateListInput): ActionNeeds => ({ flag: 'state', scope: r.scope }),
      (run, r) => this.context.stateList(run, r.scope, r.prefix, r.limit),
    ),
    'storage.get': action(
      (r: StorageKeyInput) => storage(r.area, r.key),
      (run, r) => this.storageApi.get(run, r.area, r.key),
    ),
    'storage.set': action(
      (r: StorageKeyInput & { value: Buffer }): ActionNeeds => ({
        ...storage(r.area, r.key),
        max_payload_bytes: Number.MAX_SAFE_INTEGER, // the value limit is checked by the storage service
      }),
      (run, r) => this.storageApi.set(run, r.area, r.key, r.value),
    ),
    'storage.delete': action(
      (r: StorageKeyInput) => storage(r.area, r.key),
      (run, r) => this.storageApi.delete(run, r.area, r.key),
    ),
    'storage.list': action(
      (r: StorageListInput) => storage(r.area),
      (run, r) => this.storageApi.list(run, r.area, r.prefix, r.limit),
    ),
    'prompt.get': action(
      (_r: object): ActionNeeds => ({ flag: 'prompt_get' }),
      (run) => Promise.resolve(this.context.prompt(run)),
    ),
    'steering.pull': action(
      (_r: SteeringPullInput): ActionNeeds => ({ flag: 'steering_pull' }),
      (run, r) => this.steeringPull(run, r),
    ),
    'run.get': action(
      (_r: object): ActionNeeds => ({ flag: 'run_get' }),
      (run) => Promise.resolve(this.context.runGet(run)),
    ),
  } satisfies Record<string, ActionSpec<never, unknown>>;

  /**
   * Runs one action for `caller` on run `runId` through the gate: authenticated, authorised
   * against the run's snapshot, limited and audited, then served. `payloadBytes` is the request's
   * size as the adapter received it (the wire bytes on gRPC).
   */
  execute<A extends HostActionName>(
    caller: Caller,
    name: A,
    runId: string,
    req: RequestOf<A>,
    payloadBytes: number,
    opts: { paced?: boolean } = {},
  ): Promise<ResultOf<A>> {
    const spec = this.table[name] as unknown as ActionSpec<RequestOf<A>, ResultOf<A>>;
    const needs: CallNeeds = {
      action: name,
      run_id: runId,
      payload_bytes: payloadBytes,
      ...spec.needs(req),
      ...(opts.paced ? { paced: true } : {}),
    };
    return this.gate.call(caller, needs, (run) => spec.run(run, req));
  }

  /** The one delegate of steering.pull: the run's durable steering queue (libs/runs). */
  private async steeringPull(run: RunGrant, req: SteeringPullInput): Promise<{ items: Json[] }> {
    return { items: await this.steering.pull(run, req) };
  }
}

export type HostActionTable = HostActions['table'];
export type HostActionName = keyof HostActionTable;
export type RequestOf<A extends HostActionName> = Parameters<HostActionTable[A]['needs']>[0];
export type ResultOf<A extends HostActionName> = Awaited<ReturnType<HostActionTable[A]['run']>>;
