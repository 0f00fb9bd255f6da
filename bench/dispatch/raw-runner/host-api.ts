import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { LOADER_OPTIONS, protoDir } from './proto';
import type { Struct, Value } from './struct';

/*
 * A client of the host's run-scoped API, `runnerhost.v1.HostApiService` (proto/runnerhost/v1/host_api.proto).
 * A run calls it while it is active: every request carries the run's `run_id`, and the plugin
 * token goes in the metadata (`authorization: Bearer <token>`), as on the Connect stream. Only the
 * few methods this runner uses are typed here.
 */

export interface StateGetRequest {
  run_id: string;
  scope: string;
  key: string;
}
export interface StateSetRequest extends StateGetRequest {
  value: Value;
}
export interface HistoryPageRequest {
  run_id: string;
  conversation_id?: string;
  before_cursor?: string;
  after_cursor?: string;
  limit?: number;
  direction?: string;
  include_attachments?: boolean;
}

export interface SteeringPullRequest {
  run_id: string;
  mode?: string;
  limit?: number;
  /** Wait up to this long for a follow-up when none is queued (host bound: 30 s). */
  wait_ms?: number;
}

/** The methods this runner calls: request and response types. Unset message fields decode as null. */
export interface HostApiMethods {
  StateGet: [StateGetRequest, { value: Value | null }];
  StateSet: [StateSetRequest, { success: boolean }];
  HistoryPage: [HistoryPageRequest, { items: Struct[]; next_cursor?: string; prev_cursor?: string; has_more: boolean }];
  RunGet: [{ run_id: string }, { run_id: string; status: string; cancel_requested: boolean }];
  SteeringPull: [SteeringPullRequest, { items: Struct[] }];
}
export type HostApiMethod = keyof HostApiMethods;

/** A failed host API call: the gRPC status and the protocol error code of the trailer `x-error-code`. */
export class HostApiError extends Error {
  constructor(
    readonly method: string,
    readonly code: grpc.status,
    readonly details: string,
    readonly errorCode: string | null,
  ) {
    super(`${method}: ${grpc.status[code] ?? code}${errorCode ? ` (${errorCode})` : ''}: ${details}`);
  }
}

type UnaryMethod = (
  request: unknown,
  metadata: grpc.Metadata,
  callback: (err: grpc.ServiceError | null, response?: unknown) => void,
) => grpc.ClientUnaryCall;

/** The generated client class of `runnerhost.v1.HostApiService` (its `.service` serves a fake host). */
export function loadHostApiService(dir = protoDir()): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync('runnerhost/v1/host_api.proto', { ...LOADER_OPTIONS, includeDirs: [dir] });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    runnerhost: { v1: { HostApiService: grpc.ServiceClientConstructor } };
  };
  return pkg.runnerhost.v1.HostApiService;
}

/**
 * Unary calls to the host API with the plugin token. The channel options are the gateway
 * client's, so grpc-js puts both clients on one HTTP/2 connection to the host.
 */
export class HostApi {
  /** Created on the first call, so a runner that never calls the host API never loads host_api.proto. */
  private client: grpc.Client | undefined;

  constructor(
    private readonly url: string,
    private readonly token: string,
    private readonly credentials = grpc.credentials.createInsecure(),
  ) {}

  /** One unary call; `traceparent` (the run's, from RunRequest) joins the call to the run's trace. */
  call<M extends HostApiMethod>(
    method: M,
    request: HostApiMethods[M][0],
    traceparent?: string,
  ): Promise<HostApiMethods[M][1]> {
    if (!this.client) {
      const Client = loadHostApiService();
      this.client = new Client(this.url, this.credentials, { 'grpc.enable_retries': 0 });
    }
    const client = this.client;
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${this.token}`);
    if (traceparent) {
      metadata.set('traceparent', traceparent);
    }
    const fn = (client as unknown as Record<string, UnaryMethod>)[method];
    return new Promise((resolve, reject) => {
      fn.call(client, request, metadata, (err, response) => {
        if (err) {
          const errorCode = err.metadata?.get('x-error-code')[0];
          reject(new HostApiError(method, err.code, err.details, errorCode === undefined ? null : String(errorCode)));
        } else {
          resolve(response as HostApiMethods[M][1]);
        }
      });
    });
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
}
