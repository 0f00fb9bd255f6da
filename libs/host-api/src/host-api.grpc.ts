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
import type { StorageArea } from '@libs/authz';
import { bearerToken } from '@libs/auth';
import { DomainError } from '@libs/protocol';
import { PluginsService, isMalformed, malformedError, wireBytes } from '@libs/runner-gateway';
import { HostActions, type HostActionName, type RequestOf, type ResultOf } from './host-actions';
import type { Caller } from './host-api.gate';
import { telemetry } from '@libs/telemetry';

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
/**
 * gRPC adapter of the run-scoped host API: authenticates the plugin token of the call metadata,
 * converts each proto request to its domain action and the result back to the wire, and hands
 * the action to HostActions, whose gate authorises, limits and audits every call.
 */
@Controller()
@HostApiServiceControllerMethods()
export class HostApiController implements HostApiServiceController {
  constructor(
    private readonly actions: HostActions,
    private readonly plugins: PluginsService,
  ) {}

  /** The caller is the plugin whose token the call metadata carries. */
  private caller(md: Metadata | undefined): Caller {
    return async () => {
      const token = bearerToken(md?.get('authorization').map(String));
      const plugin = token ? await this.plugins.authenticate(token) : null;
      if (!plugin) {
        throw new DomainError(
          'unauthenticated',
          token ? 'invalid plugin token' : 'missing plugin token (authorization: Bearer <token>)',
        );
      }
      return plugin.plugin_id;
    };
  }

  private call<A extends HostActionName, R extends { run_id: string }>(
    name: A,
    req: R,
    md: Metadata | undefined,
    input: (req: R) => RequestOf<A>,
  ): Promise<ResultOf<A>> {
    // A request that is not valid protobuf is refused INVALID_ARGUMENT before the gate: no run_id
    // can be read from it, so it has no audit row (docs/security.md#wire-errors-grpc). Checked here rather than by
    // an interceptor, which would cost every call an async-resource binding.
    if (isMalformed(req)) {
      throw malformedError(req);
    }
    return telemetry.tracing.withRemoteParent(md?.get('traceparent')[0]?.toString(), () =>
      this.actions.execute(this.caller(md), name, req.run_id, input(req), size(req)),
    );
  }

  invokeModel(req: InvokeModelRequest, md?: Metadata): Promise<InvokeModelResponse> {
    return this.call('model.invoke', req, md, toModelCall);
  }

  streamModel(req: InvokeModelRequest, md?: Metadata): Observable<StreamModelChunk> {
    return from(this.call('model.stream', req, md, toModelCall)).pipe(mergeMap((chunks) => from(chunks)));
  }

  countTokens(req: CountTokensRequest, md?: Metadata): Promise<CountTokensResponse> {
    return this.call('model.count_tokens', req, md, (r: CountTokensRequest) => ({
      model_id: r.model_id,
      messages: r.messages,
      tools: r.tools,
    }));
  }

  rerank(req: RerankRequest, md?: Metadata): Promise<RerankResponse> {
    return this.call('model.rerank', req, md, (r: RerankRequest) => ({
      model_id: r.model_id,
      query: r.query,
      documents: r.documents,
      top_k: r.top_k,
      extra_args: r.extra_args,
    }));
  }

  getToolDetail(req: GetToolDetailRequest, md?: Metadata): Promise<GetToolDetailResponse> {
    return this.call('tool.detail', req, md, (r: GetToolDetailRequest) => ({ tool_name: r.tool_name }));
  }

  callTool(req: CallToolRequest, md?: Metadata): Promise<CallToolResponse> {
    return this.call('tool.call', req, md, (r: CallToolRequest) => ({
      tool_name: r.tool_name,
      parameters: r.parameters ?? {},
    }));
  }

  retrieveKnowledge(req: RetrieveKnowledgeRequest, md?: Metadata): Promise<RetrieveKnowledgeResponse> {
    return this.call('knowledge.retrieve', req, md, (r: RetrieveKnowledgeRequest) => ({
      kb_id: r.kb_id,
      query_text: r.query_text,
      top_k: r.top_k,
      filters: r.filters,
    }));
  }

  historyPage(req: HistoryPageRequest, md?: Metadata): Promise<HistoryPageResponse> {
    return this.call('history.page', req, md, (r: HistoryPageRequest) => r).then(cursors);
  }

  historySearch(req: HistorySearchRequest, md?: Metadata): Promise<HistorySearchResponse> {
    return this.call('history.search', req, md, (r: HistorySearchRequest) => ({
      query: r.query,
      filters: r.filters,
      top_k: r.top_k,
    }));
  }

  eventGet(req: EventGetRequest, md?: Metadata): Promise<EventGetResponse> {
    return this.call('event.get', req, md, (r: EventGetRequest) => ({ event_id: r.event_id })).then(({ event }) => ({
      event: { ...event },
    }));
  }

  eventPage(req: EventPageRequest, md?: Metadata): Promise<EventPageResponse> {
    return this.call('event.page', req, md, (r: EventPageRequest) => r).then(cursors);
  }

  stateGet(req: StateGetRequest, md?: Metadata): Promise<StateGetResponse> {
    return this.call('state.get', req, md, stateKey).then(({ value }) => ({ value: wireValue(value) }));
  }

  stateSet(req: StateSetRequest, md?: Metadata): Promise<StateSetResponse> {
    return this.call('state.set', req, md, (r: StateSetRequest) => ({ scope: r.scope, key: r.key, value: r.value }));
  }

  stateDelete(req: StateDeleteRequest, md?: Metadata): Promise<StateDeleteResponse> {
    return this.call('state.delete', req, md, stateKey);
  }

  stateList(req: StateListRequest, md?: Metadata): Promise<StateListResponse> {
    return this.call('state.list', req, md, (r: StateListRequest) => ({
      scope: r.scope,
      prefix: r.prefix,
      limit: r.limit,
    }));
  }

  storageGet(req: StorageGetRequest, md?: Metadata): Promise<StorageGetResponse> {
    return this.call('storage.get', req, md, storageKey);
  }

  storageSet(req: StorageSetRequest, md?: Metadata): Promise<StorageSetResponse> {
    return this.call('storage.set', req, md, (r: StorageSetRequest) => ({
      ...storageKey(r),
      value: Buffer.from(r.value),
    }));
  }

  storageDelete(req: StorageDeleteRequest, md?: Metadata): Promise<StorageDeleteResponse> {
    return this.call('storage.delete', req, md, storageKey);
  }

  storageList(req: StorageListRequest, md?: Metadata): Promise<StorageListResponse> {
    return this.call('storage.list', req, md, (r: StorageListRequest) => ({
      area: r.area as StorageArea,
      prefix: r.prefix,
      limit: r.limit,
    }));
  }

  promptGet(req: PromptGetRequest, md?: Metadata): Promise<PromptGetResponse> {
    return this.call('prompt.get', req, md, () => ({}));
  }

  steeringPull(req: SteeringPullRequest, md?: Metadata): Promise<SteeringPullResponse> {
    return this.call('steering.pull', req, md, (r: SteeringPullRequest) => ({
      mode: r.mode,
      limit: r.limit,
      wait_ms: r.wait_ms,
    }));
  }

  runGet(req: RunGetRequest, md?: Metadata): Promise<RunGetResponse> {
    return this.call('run.get', req, md, () => ({}));
  }
}

const toModelCall = (r: InvokeModelRequest) => ({
  model_id: r.model_id,
  messages: r.messages,
  tools: r.tools,
  extra_args: r.extra_args,
  remove_think: r.remove_think,
  timeout_ms: r.timeout_ms,
});
const stateKey = (r: { scope: string; key: string }) => ({ scope: r.scope, key: r.key });
// The area is checked by the gate (invalid_argument naming `area`), before any service sees it.
const storageKey = (r: { area: string; key: string }) => ({ area: r.area as StorageArea, key: r.key });
