import { Controller } from '@nestjs/common';
import type { Metadata } from '@grpc/grpc-js';
import { Root, common } from 'protobufjs';
import { from, mergeMap, type Observable } from 'rxjs';
import {
  HostApiServiceControllerMethods,
  type CallToolRequest,
  type CallToolResponse,
  type CountTokensRequest,
  type CountTokensResponse,
  type EventGetRequest,
  type EventGetResponse,
  type EventPageRequest,
  type EventPageResponse,
  type GetToolDetailRequest,
  type GetToolDetailResponse,
  type HistoryPageRequest,
  type HistoryPageResponse,
  type HistorySearchRequest,
  type HistorySearchResponse,
  type HostApiServiceController,
  type InvokeModelRequest,
  type InvokeModelResponse,
  type PromptGetRequest,
  type PromptGetResponse,
  type RerankRequest,
  type RerankResponse,
  type RetrieveKnowledgeRequest,
  type RetrieveKnowledgeResponse,
  type RunGetRequest,
  type RunGetResponse,
  type StateDeleteRequest,
  type StateDeleteResponse,
  type StateGetRequest,
  type StateGetResponse,
  type StateListRequest,
  type StateListResponse,
  type StateSetRequest,
  type StateSetResponse,
  type SteeringPullRequest,
  type SteeringPullResponse,
  type StorageDeleteRequest,
  type StorageDeleteResponse,
  type StorageGetRequest,
  type StorageGetResponse,
  type StorageListRequest,
  type StorageListResponse,
  type StorageSetRequest,
  type StorageSetResponse,
  type StreamModelChunk,
} from '@libs/proto';
import { KnowledgeService, ModelsService, ToolsService, type ResourceCall } from '@libs/resources';
import { isMalformed, malformedError, wireBytes } from '@libs/runner-gateway';
import { SteeringService, type ActiveRun } from '@libs/runs';
import { ContextApiService } from './context-api.service';
import { HostApiGuard, type CallNeeds } from './host-api.guard';
import type { StorageArea } from '@libs/authz';
import { StorageApiService } from './storage-api.service';

const size = (req: object) => wireBytes(req) ?? Buffer.byteLength(JSON.stringify(req));
/** Page cursors: absent rather than null on the wire. */
const cursors = <T extends { next_cursor: string | null; prev_cursor?: string | null }>(page: T) => ({
  ...page,
  next_cursor: page.next_cursor ?? undefined,
  prev_cursor: page.prev_cursor ?? undefined,
});
/**
 * A JSON value for a `google.protobuf.Value` response field. The parent message's converter hands
 * only objects to the Value wrapper and rejects a bare string, number or boolean ("object
 * expected": the call would end INTERNAL), so those go out as Value messages; objects, arrays and
 * null go through the wrappers as they are.
 */
const VALUE = Root.fromJSON(common.get('google/protobuf/struct.proto')!).lookupType('google.protobuf.Value');
function wireValue(value: unknown): unknown {
  if (typeof value === 'string') {
    return VALUE.create({ stringValue: value });
  }
  if (typeof value === 'number') {
    return VALUE.create({ numberValue: value });
  }
  if (typeof value === 'boolean') {
    return VALUE.create({ boolValue: value });
  }
  return value ?? undefined;
}
/** The run-side handle a resource operation gets: its abort signal and deadline. */
const callOf = (run: ActiveRun): ResourceCall => ({
  run_id: run.run_id,
  signal: run.abort.signal,
  deadline_at_ms: run.snapshot.deadline_at_ms,
});
const grantedTool = (run: ActiveRun, name: string) => run.snapshot.resources.tools.find((t) => t.tool_name === name)!;

/**
 * gRPC adapter of the run-scoped host API. Each method names what the call needs and hands the
 * work to a service; HostApiGuard authenticates, authorises, limits and audits every call.
 */
@Controller()
@HostApiServiceControllerMethods()
export class HostApiController implements HostApiServiceController {
  constructor(
    private readonly guard: HostApiGuard,
    private readonly context: ContextApiService,
    private readonly storage: StorageApiService,
    private readonly models: ModelsService,
    private readonly tools: ToolsService,
    private readonly knowledge: KnowledgeService,
    private readonly steering: SteeringService,
  ) {}

  private needs(action: string, req: { run_id: string }, extra: Partial<CallNeeds> = {}): CallNeeds {
    // A request that is not valid protobuf is refused INVALID_ARGUMENT before the guard: no run_id
    // can be read from it, so it has no audit row (README, Security). Checked here rather than by
    // an interceptor, which would cost every call an async-resource binding.
    if (isMalformed(req)) {
      throw malformedError(req);
    }
    return { action, run_id: req.run_id, payload_bytes: size(req), ...extra };
  }

  invokeModel(req: InvokeModelRequest, md?: Metadata): Promise<InvokeModelResponse> {
    const resource = { kind: 'model' as const, id: req.model_id, operation: 'invoke' };
    return this.guard.call(md, this.needs('model.invoke', req, { resource }), (run) =>
      this.models.invoke(callOf(run), req),
    );
  }

  streamModel(req: InvokeModelRequest, md?: Metadata): Observable<StreamModelChunk> {
    const resource = { kind: 'model' as const, id: req.model_id, operation: 'stream' };
    // The guard (and its audit row) decides the call; the chunks then flow as the provider sends them.
    return from(this.guard.call(md, this.needs('model.stream', req, { resource }), (run) => Promise.resolve(run))).pipe(
      mergeMap((run) => from(this.models.stream(callOf(run), req))),
    );
  }

  countTokens(req: CountTokensRequest, md?: Metadata): Promise<CountTokensResponse> {
    const resource = { kind: 'model' as const, id: req.model_id, operation: 'count_tokens' };
    return this.guard.call(md, this.needs('model.count_tokens', req, { resource }), (run) =>
      this.models.countTokens(callOf(run), req),
    );
  }

  rerank(req: RerankRequest, md?: Metadata): Promise<RerankResponse> {
    const resource = { kind: 'model' as const, id: req.model_id, operation: 'rerank' };
    return this.guard.call(md, this.needs('model.rerank', req, { resource }), (run) =>
      this.models.rerank(callOf(run), req),
    );
  }

  getToolDetail(req: GetToolDetailRequest, md?: Metadata): Promise<GetToolDetailResponse> {
    const resource = { kind: 'tool' as const, id: req.tool_name, operation: 'detail' };
    return this.guard.call(md, this.needs('tool.detail', req, { resource }), async (run) => ({
      tool: await this.tools.detail(callOf(run), grantedTool(run, req.tool_name)),
    }));
  }

  callTool(req: CallToolRequest, md?: Metadata): Promise<CallToolResponse> {
    const resource = { kind: 'tool' as const, id: req.tool_name, operation: 'call' };
    return this.guard.call(md, this.needs('tool.call', req, { resource }), async (run) => ({
      result: await this.tools.call(callOf(run), grantedTool(run, req.tool_name), req.parameters ?? {}),
    }));
  }

  retrieveKnowledge(req: RetrieveKnowledgeRequest, md?: Metadata): Promise<RetrieveKnowledgeResponse> {
    const resource = { kind: 'knowledge_base' as const, id: req.kb_id, operation: 'retrieve' };
    return this.guard.call(md, this.needs('knowledge.retrieve', req, { resource }), async (run) => ({
      results: await this.knowledge.retrieve(callOf(run), {
        kb_id: req.kb_id,
        query_text: req.query_text,
        top_k: req.top_k,
        filters: req.filters,
      }),
    }));
  }

  historyPage(req: HistoryPageRequest, md?: Metadata): Promise<HistoryPageResponse> {
    const needs = this.needs('history.page', req, { flag: 'history_page', conversation_id: req.conversation_id });
    return this.guard.call(md, needs, async (run) => cursors(await this.context.historyPage(run, req)));
  }

  historySearch(req: HistorySearchRequest, md?: Metadata): Promise<HistorySearchResponse> {
    const conversation: unknown = req.filters?.conversation_id;
    const needs = this.needs('history.search', req, {
      flag: 'history_search',
      conversation_id: typeof conversation === 'string' ? conversation : undefined,
    });
    return this.guard.call(md, needs, (run) => this.context.historySearch(run, req.query, req.top_k));
  }

  eventGet(req: EventGetRequest, md?: Metadata): Promise<EventGetResponse> {
    const needs = this.needs('event.get', req, { flag: 'event_get' });
    return this.guard.call(md, needs, async (run) => ({
      event: { ...(await this.context.eventGet(run, req.event_id)) },
    }));
  }

  eventPage(req: EventPageRequest, md?: Metadata): Promise<EventPageResponse> {
    const needs = this.needs('event.page', req, { flag: 'event_page', conversation_id: req.conversation_id });
    return this.guard.call(md, needs, async (run) =>
      cursors(await this.context.eventPage(run, req.event_types, req.before_cursor, req.limit)),
    );
  }

  stateGet(req: StateGetRequest, md?: Metadata): Promise<StateGetResponse> {
    const needs = this.needs('state.get', req, { flag: 'state', scope: req.scope });
    return this.guard.call(md, needs, async (run) => ({
      value: wireValue((await this.context.stateGet(run, req.scope, req.key)).value),
    }));
  }

  stateSet(req: StateSetRequest, md?: Metadata): Promise<StateSetResponse> {
    const needs = this.needs('state.set', req, { flag: 'state', scope: req.scope });
    return this.guard.call(md, needs, (run) => this.context.stateSet(run, req.scope, req.key, req.value));
  }

  stateDelete(req: StateDeleteRequest, md?: Metadata): Promise<StateDeleteResponse> {
    const needs = this.needs('state.delete', req, { flag: 'state', scope: req.scope });
    return this.guard.call(md, needs, (run) => this.context.stateDelete(run, req.scope, req.key));
  }

  stateList(req: StateListRequest, md?: Metadata): Promise<StateListResponse> {
    const needs = this.needs('state.list', req, { flag: 'state', scope: req.scope });
    return this.guard.call(md, needs, (run) => this.context.stateList(run, req.scope, req.prefix, req.limit));
  }

  storageGet(req: StorageGetRequest, md?: Metadata): Promise<StorageGetResponse> {
    const area = req.area as StorageArea;
    const needs = this.needs('storage.get', req, { flag: 'storage', storage: area, scope: req.key });
    return this.guard.call(md, needs, (run) => this.storage.get(run, area, req.key));
  }

  storageSet(req: StorageSetRequest, md?: Metadata): Promise<StorageSetResponse> {
    const area = req.area as StorageArea;
    const needs: CallNeeds = {
      ...this.needs('storage.set', req, { flag: 'storage', storage: area, scope: req.key }),
      max_payload_bytes: Number.MAX_SAFE_INTEGER, // the value limit is checked by the storage service
    };
    return this.guard.call(md, needs, (run) => this.storage.set(run, area, req.key, Buffer.from(req.value)));
  }

  storageDelete(req: StorageDeleteRequest, md?: Metadata): Promise<StorageDeleteResponse> {
    const area = req.area as StorageArea;
    const needs = this.needs('storage.delete', req, { flag: 'storage', storage: area, scope: req.key });
    return this.guard.call(md, needs, (run) => this.storage.delete(run, area, req.key));
  }

  storageList(req: StorageListRequest, md?: Metadata): Promise<StorageListResponse> {
    const area = req.area as StorageArea;
    const needs = this.needs('storage.list', req, { flag: 'storage', storage: area });
    return this.guard.call(md, needs, (run) => this.storage.list(run, area, req.prefix, req.limit));
  }

  promptGet(req: PromptGetRequest, md?: Metadata): Promise<PromptGetResponse> {
    const needs = this.needs('prompt.get', req, { flag: 'prompt_get' });
    return this.guard.call(md, needs, (run) => Promise.resolve(this.context.prompt(run)));
  }

  steeringPull(req: SteeringPullRequest, md?: Metadata): Promise<SteeringPullResponse> {
    const needs = this.needs('steering.pull', req, { flag: 'steering_pull' });
    return this.guard.call(md, needs, async (run) => ({ items: await this.steering.pull(run, req) }));
  }

  runGet(req: RunGetRequest, md?: Metadata): Promise<RunGetResponse> {
    const needs = this.needs('run.get', req, { flag: 'run_get' });
    return this.guard.call(md, needs, (run) => Promise.resolve(this.context.runGet(run)));
  }
}
