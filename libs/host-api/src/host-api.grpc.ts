import { Injectable, Logger } from '@nestjs/common';
import type * as grpc from '@grpc/grpc-js';
import type { Metadata } from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import type { Message } from 'protobufjs';
import {
  HOST_API_SERVICE_NAME,
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
  jsonValueMessage,
} from '@libs/proto';
import { bearerToken } from '@libs/auth';
import { DomainError } from '@libs/protocol';
import { PluginsService, grpcStatusErrorOf, isMalformed, malformedError, wireBytes } from '@libs/runner-gateway';
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
 * A JSON value for a `google.protobuf.Value` response field, built as Value / Struct / ListValue
 * messages. The parent message's converter hands only objects to the Value wrapper and rejects a
 * bare string, number or boolean ("object expected": the call would end INTERNAL); and the JSON
 * wrappers (libs/proto/src/json-wrappers.ts) pass a message through as it is, so a tree of
 * messages skips their per-field conversion of plain JSON (a third of the host's CPU of encoding
 * a StateGet answer: docs/benchmarks.md#host-api; the tree: jsonValueMessage). The encoders read
 * the same fields either way: the bytes are the wrappers' (host-api.grpc.spec.ts). No value (null: StateGet of a key never
 * set) is the absent field, as before; a null inside an object or a list is NULL_VALUE.
 */
export function wireValue(value: unknown): Message | undefined {
  // Stored state is JSON text (StateService.encode), so nothing but JSON is read back.
  return value === undefined || value === null ? undefined : jsonValueMessage(value);
}
/**
 * gRPC adapter of the run-scoped host API, served by grpc-js handlers directly (no framework RPC
 * layer per call: docs/protocol.md#host-api): authenticates the plugin token of the call
 * metadata, converts each proto request to its domain action and the result back to the wire,
 * and hands the action to HostActions, whose gate authorises, limits and audits every call. Every
 * error leaves as the protocol's gRPC status (GrpcStatusError: status code, message, `x-error-*`
 * trailers), the same as the exception filter gives the other gRPC services.
 */
@Injectable()
export class HostApiGrpc {
  private readonly logger = new Logger('Errors');

  constructor(
    private readonly actions: HostActions,
    private readonly plugins: PluginsService,
  ) {}

  /** The caller is the plugin whose token the call metadata carries. */
  private caller(md: Metadata): Caller {
    return async () => {
      const token = bearerToken(md.get('authorization').map(String));
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

  private async call<A extends HostActionName, R extends { run_id: string }>(
    name: A,
    req: R,
    md: Metadata,
    input: (req: R) => RequestOf<A>,
  ): Promise<ResultOf<A>> {
    // A request that is not valid protobuf is refused INVALID_ARGUMENT before the gate: no run_id
    // can be read from it, so it has no audit row (docs/security.md#wire-errors-grpc).
    if (isMalformed(req)) {
      throw malformedError(req);
    }
    return telemetry.tracing.withRemoteParent(md.get('traceparent')[0]?.toString(), () =>
      this.actions.execute(this.caller(md), name, req.run_id, input(req), size(req)),
    );
  }

  /** A unary handler: the action's answer converted to the wire, or the error as its gRPC status. */
  private unary<A extends HostActionName, R extends { run_id: string }, W>(
    name: A,
    input: (req: R) => RequestOf<A>,
    output: (res: ResultOf<A>) => W,
  ): grpc.handleUnaryCall<R, W> {
    return (call, callback) => {
      // The conversion to the wire inside the chain: if it throws, the call ends with its status.
      this.call(name, call.request, call.metadata, input)
        .then(output)
        .then(
          (res) => callback(null, res),
          (e: unknown) => callback(grpcStatusErrorOf(e, this.logger)),
        );
    };
  }

  /**
   * StreamModel: the gate passes (and audits) first; the chunks then flow as the provider sends
   * them, each written when the stream has room (the `drain` event). A cancelled call stops the
   * provider's stream; an error ends the call with its gRPC status.
   */
  private streamModel(): grpc.handleServerStreamingCall<InvokeModelRequest, StreamModelChunk> {
    return (call) => {
      const write = async () => {
        const chunks = await this.call('model.stream', call.request, call.metadata, toModelCall);
        for await (const chunk of chunks) {
          if (call.cancelled) {
            return;
          }
          if (!call.write(chunk)) {
            await new Promise<void>((resolve) => {
              const done = () => {
                call.off('drain', done);
                call.off('cancelled', done);
                resolve();
              };
              call.on('drain', done);
              call.on('cancelled', done);
            });
          }
        }
        call.end();
      };
      write().catch((e: unknown) => {
        if (!call.cancelled) {
          call.emit('error', grpcStatusErrorOf(e, this.logger));
        }
      });
    };
  }

  /** The handlers of `runnerhost.v1.HostApiService`, by method. */
  handlers(): HostApiHandlers {
    return {
      invokeModel: this.unary('model.invoke', toModelCall, (res): InvokeModelResponse => res),
      streamModel: this.streamModel(),
      countTokens: this.unary(
        'model.count_tokens',
        (r: CountTokensRequest) => ({ model_id: r.model_id, messages: r.messages, tools: r.tools }),
        (res): CountTokensResponse => res,
      ),
      rerank: this.unary(
        'model.rerank',
        (r: RerankRequest) => ({
          model_id: r.model_id,
          query: r.query,
          documents: r.documents,
          top_k: r.top_k,
          extra_args: struct(r.extra_args),
        }),
        (res): RerankResponse => res,
      ),
      getToolDetail: this.unary(
        'tool.detail',
        (r: GetToolDetailRequest) => ({ tool_name: r.tool_name }),
        (res): GetToolDetailResponse => res,
      ),
      callTool: this.unary(
        'tool.call',
        (r: CallToolRequest) => ({ tool_name: r.tool_name, parameters: r.parameters ?? {} }),
        (res): CallToolResponse => res,
      ),
      retrieveKnowledge: this.unary(
        'knowledge.retrieve',
        (r: RetrieveKnowledgeRequest) => ({
          kb_id: r.kb_id,
          query_text: r.query_text,
          top_k: r.top_k,
          filters: struct(r.filters),
        }),
        (res): RetrieveKnowledgeResponse => res,
      ),
      historyPage: this.unary(
        'history.page',
        (r: HistoryPageRequest) => r,
        (res): HistoryPageResponse => cursors(res),
      ),
      historySearch: this.unary(
        'history.search',
        (r: HistorySearchRequest) => ({ query: r.query, filters: struct(r.filters), top_k: r.top_k }),
        (res): HistorySearchResponse => res,
      ),
      eventGet: this.unary(
        'event.get',
        (r: EventGetRequest) => ({ event_id: r.event_id }),
        ({ event }): EventGetResponse => ({ event: { ...event } }),
      ),
      eventPage: this.unary(
        'event.page',
        (r: EventPageRequest) => r,
        (res): EventPageResponse => cursors(res),
      ),
      stateGet: this.unary(
        'state.get',
        (r: StateGetRequest) => stateKey(r),
        ({ value }): StateGetResponse => ({ value: wireValue(value) }),
      ),
      stateSet: this.unary(
        'state.set',
        (r: StateSetRequest) => ({ scope: r.scope, key: r.key, value: r.value }),
        (res): StateSetResponse => res,
      ),
      stateDelete: this.unary(
        'state.delete',
        (r: StateDeleteRequest) => stateKey(r),
        (res): StateDeleteResponse => res,
      ),
      stateList: this.unary(
        'state.list',
        (r: StateListRequest) => ({ scope: r.scope, prefix: r.prefix, limit: r.limit }),
        (res): StateListResponse => res,
      ),
      storageGet: this.unary(
        'storage.get',
        (r: StorageGetRequest) => storageKey(r),
        (res): StorageGetResponse => res,
      ),
      storageSet: this.unary(
        'storage.set',
        (r: StorageSetRequest) => ({ ...storageKey(r), value: Buffer.from(r.value) }),
        (res): StorageSetResponse => res,
      ),
      storageDelete: this.unary(
        'storage.delete',
        (r: StorageDeleteRequest) => storageKey(r),
        (res): StorageDeleteResponse => res,
      ),
      storageList: this.unary(
        'storage.list',
        (r: StorageListRequest) => ({ area: r.area, prefix: r.prefix, limit: r.limit }),
        (res): StorageListResponse => res,
      ),
      promptGet: this.unary(
        'prompt.get',
        (_r: PromptGetRequest) => ({}),
        (res): PromptGetResponse => res,
      ),
      steeringPull: this.unary(
        'steering.pull',
        (r: SteeringPullRequest) => ({ mode: r.mode, limit: r.limit, wait_ms: r.wait_ms }),
        (res): SteeringPullResponse => res,
      ),
      runGet: this.unary(
        'run.get',
        (_r: RunGetRequest) => ({}),
        (res): RunGetResponse => res,
      ),
    };
  }
}

/** One grpc-js handler per method of HostApiService, under the method's camelCase name. */
export type HostApiHandlers = Record<keyof HostApiServiceController, grpc.UntypedHandleCall>;

/** The fully qualified name of the service in the loaded package definition. */
const HOST_API_SERVICE = `runnerhost.v1.${HOST_API_SERVICE_NAME}`;

/**
 * Serves HostApiService on `server` with the handlers above, and takes the service out of the
 * package definition the framework's gRPC server loads next (given as `onLoadPackageDefinition`),
 * so that the framework registers no handler of its own for it. Call it after the request
 * deserializers were made tolerant (tolerateMalformedRequests): the service keeps them.
 */
export function serveHostApi(definition: PackageDefinition, server: grpc.Server, api: HostApiGrpc): void {
  const service = definition[HOST_API_SERVICE];
  if (!service || 'format' in service) {
    throw new Error(`${HOST_API_SERVICE} is not in the package definition`);
  }
  server.addService(service, api.handlers());
  delete definition[HOST_API_SERVICE];
}

const toModelCall = (r: InvokeModelRequest) => ({
  model_id: r.model_id,
  messages: r.messages,
  tools: r.tools,
  extra_args: struct(r.extra_args),
  remove_think: r.remove_think,
  timeout_ms: r.timeout_ms,
});
/** An optional `google.protobuf.Struct` field: the JSON wrapper reads an absent one as null; the domain reads absent. */
const struct = (value: Record<string, unknown> | null | undefined) => value ?? undefined;
const stateKey = (r: { scope: string; key: string }) => ({ scope: r.scope, key: r.key });
// The area is checked by the gate (invalid_argument naming `area`), before any service sees it.
const storageKey = (r: { area: string; key: string }) => ({ area: r.area, key: r.key });
