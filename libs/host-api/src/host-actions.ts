import { Injectable } from '@nestjs/common';
import { hostApiRequest, type HostApiAction, type HostApiParsed, type HostApiRequest } from '@libs/protocol';
import { KnowledgeService, ModelsService, ToolsService, type ResourceCall } from '@libs/resources';
import { SteeringService, WorkspaceQuotaGate, type RunGrant } from '@libs/runs';
import { ContextApiService } from './context-api.service';
import { HostApiGate, type CallNeeds, type Caller } from './host-api.gate';
import { StorageApiService } from './storage-api.service';

type Json = Record<string, unknown>;

/*
 * The host API's actions in domain terms (docs/protocol.md#host-api). Each action's request is a
 * schema of @libs/protocol (HOST_API_REQUESTS): adapters convert their wire to its input (no
 * run_id: the adapter names the run), and execute() parses it once, for both adapters — gRPC for
 * plugins, in-process for the built-in runner — after the gate passed, so a refused request is
 * audited like any failed call. `needs` reads the request as the adapter gave it (the ids the gate
 * checks against the run's frozen grants); `run` gets the parsed request.
 */

/** What an action needs besides the run, the action name and the payload size. */
export type ActionNeeds = Omit<CallNeeds, 'action' | 'run_id' | 'payload_bytes'>;

interface ActionSpec<A extends HostApiAction, Res> {
  name: A;
  needs(req: HostApiRequest<A>): ActionNeeds;
  run(run: RunGrant, req: HostApiParsed<A>): Promise<Res>;
}

const action = <A extends HostApiAction, Res>(
  name: A,
  needs: (req: HostApiRequest<A>) => ActionNeeds,
  run: (run: RunGrant, req: HostApiParsed<A>) => Promise<Res>,
): ActionSpec<A, Res> => ({ name, needs, run });

const model = (id: string, operation: string): ActionNeeds => ({ resource: { kind: 'model', id, operation } });
/** A call that writes for the run (docs/scale-out.md#fenced-host-api-writes): its audit row is fenced too. */
const writing = (needs: ActionNeeds): ActionNeeds => ({ ...needs, writes: true });
const tool = (id: string, operation: string): ActionNeeds => ({ resource: { kind: 'tool', id, operation } });
const storage = (area: string, key?: string): ActionNeeds => ({ flag: 'storage', storage: area, scope: key });

/** The run-side handle a resource operation gets: its abort signal and deadline. */
const callOf = (run: RunGrant): ResourceCall => ({
  run_id: run.run_id,
  signal: run.signal,
  deadline_at_ms: run.snapshot.deadline_at_ms,
  interactions: (run.snapshot.interactions ?? []).includes('request'),
  lease: run.lease ?? null,
});
const grantedTool = (run: RunGrant, name: string) => run.snapshot.resources.tools.find((t) => t.tool_name === name)!;

/**
 * The action table: action → needed grant, resource and limits (`read: true` for the actions that
 * only read the host's own data: their allowed calls are audited behind the answer), and the one
 * service call that serves it. Adding an action here serves it on both adapters.
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

  /** The actions as written; `table` below is the same object, typed per action name. */
  readonly specs = {
    'model.invoke': action(
      'model.invoke',
      (r) => writing(model(r.model_id, 'invoke')),
      async (run, r) => {
        await this.tokensLeft(run);
        return this.models.invoke(callOf(run), r);
      },
    ),
    // Resolves once the gate passed (and audited); the chunks then flow as the provider sends them.
    'model.stream': action(
      'model.stream',
      (r) => writing(model(r.model_id, 'stream')),
      async (run, r) => {
        await this.tokensLeft(run);
        return this.models.stream(callOf(run), r);
      },
    ),
    'model.count_tokens': action(
      'model.count_tokens',
      (r) => model(r.model_id, 'count_tokens'),
      (run, r) => this.models.countTokens(callOf(run), r),
    ),
    'model.rerank': action(
      'model.rerank',
      (r) => writing(model(r.model_id, 'rerank')),
      async (run, r) => {
        await this.tokensLeft(run);
        return this.models.rerank(callOf(run), r);
      },
    ),
    'tool.detail': action(
      'tool.detail',
      (r) => tool(r.tool_name, 'detail'),
      async (run, r) => ({ tool: await this.tools.detail(callOf(run), grantedTool(run, r.tool_name)) }),
    ),
    'tool.call': action(
      'tool.call',
      (r) => tool(r.tool_name, 'call'),
      async (run, r) => ({ result: await this.tools.call(callOf(run), grantedTool(run, r.tool_name), r.parameters) }),
    ),
    'knowledge.retrieve': action(
      'knowledge.retrieve',
      (r): ActionNeeds => ({
        resource: { kind: 'knowledge_base', id: r.kb_id, operation: 'retrieve' },
      }),
      async (run, r) => ({ results: await this.knowledge.retrieve(callOf(run), r) }),
    ),
    'history.page': action(
      'history.page',
      (r): ActionNeeds => ({ flag: 'history_page', conversation_id: r.conversation_id, read: true }),
      (run, r) => this.context.historyPage(run, r),
    ),
    'history.search': action(
      'history.search',
      (r): ActionNeeds => {
        const conversation: unknown = r.filters?.conversation_id;
        return {
          flag: 'history_search',
          conversation_id: typeof conversation === 'string' ? conversation : undefined,
          read: true,
        };
      },
      (run, r) => this.context.historySearch(run, r.query, r.top_k),
    ),
    'event.get': action(
      'event.get',
      (_r): ActionNeeds => ({ flag: 'event_get', read: true }),
      async (run, r) => ({ event: await this.context.eventGet(run, r.event_id) }),
    ),
    'event.page': action(
      'event.page',
      (r): ActionNeeds => ({ flag: 'event_page', conversation_id: r.conversation_id, read: true }),
      (run, r) => this.context.eventPage(run, r.event_types, r.before_cursor, r.limit),
    ),
    'state.get': action(
      'state.get',
      (r): ActionNeeds => ({ flag: 'state', scope: r.scope, read: true }),
      (run, r) => this.context.stateGet(run, r.scope, r.key),
    ),
    'state.set': action(
      'state.set',
      (r): ActionNeeds => ({ flag: 'state', scope: r.scope, writes: true }),
      (run, r) => this.context.stateSet(run, r.scope, r.key, r.value),
    ),
    'state.delete': action(
      'state.delete',
      (r): ActionNeeds => ({ flag: 'state', scope: r.scope, writes: true }),
      (run, r) => this.context.stateDelete(run, r.scope, r.key),
    ),
    'state.list': action(
      'state.list',
      (r): ActionNeeds => ({ flag: 'state', scope: r.scope, read: true }),
      (run, r) => this.context.stateList(run, r.scope, r.prefix, r.limit),
    ),
    'storage.get': action(
      'storage.get',
      (r): ActionNeeds => ({ ...storage(r.area, r.key), read: true }),
      (run, r) => this.storageApi.get(run, r.area, r.key),
    ),
    'storage.set': action(
      'storage.set',
      (r): ActionNeeds => ({
        ...storage(r.area, r.key),
        writes: true,
        max_payload_bytes: Number.MAX_SAFE_INTEGER, // the value limit is checked by the storage service
      }),
      (run, r) => this.storageApi.set(run, r.area, r.key, r.value),
    ),
    'storage.delete': action(
      'storage.delete',
      (r) => writing(storage(r.area, r.key)),
      (run, r) => this.storageApi.delete(run, r.area, r.key),
    ),
    'storage.list': action(
      'storage.list',
      (r): ActionNeeds => ({ ...storage(r.area), read: true }),
      (run, r) => this.storageApi.list(run, r.area, r.prefix, r.limit),
    ),
    'prompt.get': action(
      'prompt.get',
      (_r): ActionNeeds => ({ flag: 'prompt_get', read: true }),
      (run) => Promise.resolve(this.context.prompt(run)),
    ),
    'steering.pull': action(
      'steering.pull',
      (_r): ActionNeeds => ({ flag: 'steering_pull', writes: true }),
      (run, r) => this.steeringPull(run, r),
    ),
    'run.get': action(
      'run.get',
      (_r): ActionNeeds => ({ flag: 'run_get', read: true }),
      (run) => Promise.resolve(this.context.runGet(run)),
    ),
  } satisfies { [A in HostApiAction]: ActionSpec<A, unknown> };

  /** The action table by name: each entry's request, parsed request and answer are its action's. */
  readonly table: { [A in HostApiAction]: ActionSpec<A, ResultOf<A>> } = this.specs;

  /**
   * Runs one action for `caller` on run `runId` through the gate: authenticated, authorised
   * against the run's snapshot, limited and audited; then the request is parsed by its schema
   * (invalid_argument naming the field, audited as a failed call) and served. `payloadBytes` is
   * the request's size as the adapter received it (the wire bytes on gRPC).
   */
  execute<A extends HostActionName>(
    caller: Caller,
    name: A,
    runId: string,
    req: RequestOf<A>,
    payloadBytes: number,
    opts: { paced?: boolean } = {},
  ): Promise<ResultOf<A>> {
    const spec: ActionSpec<A, ResultOf<A>> = this.table[name];
    const needs: CallNeeds = {
      action: name,
      run_id: runId,
      payload_bytes: payloadBytes,
      ...spec.needs(req),
      ...(opts.paced ? { paced: true } : {}),
    };
    return this.gate.call(caller, needs, (run) => spec.run(run, hostApiRequest(name, req)));
  }

  /** The one delegate of steering.pull: the run's durable steering queue (libs/runs). */
  private async steeringPull(run: RunGrant, req: HostApiParsed<'steering.pull'>): Promise<{ items: Json[] }> {
    return { items: await this.steering.pull(run, req) };
  }
}

export type HostActionName = HostApiAction;
/** What an adapter hands execute() for action `A` (before its schema parsed it). */
export type RequestOf<A extends HostActionName> = HostApiRequest<A>;
/** What action `A` answers, before an adapter converts it to its wire. */
export type ResultOf<A extends HostActionName> = Awaited<ReturnType<HostActions['specs'][A]['run']>>;
