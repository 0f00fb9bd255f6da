import * as grpc from '@grpc/grpc-js';
import { watchAbort } from './abort';
import { hostApiErrorFromGrpc } from './errors';
import {
  abortReasonOf,
  type CallOptions,
  type HostApiTransport,
  type InvokeModelRequest,
  type RequestOf,
  type ResponseOf,
  type StreamModelItem,
  type UnaryMethod,
} from './host-api';
import { fromStructOrNull, fromValue, toStruct, toValue, type WireStruct } from './json';
import { CHANNEL_OPTIONS, decodedAs, loadServices, wireMethod, type WireMethod } from './wire';

/*
 * The host API over gRPC: plain JSON in and out, google.protobuf.Struct/Value converted per
 * field, the plugin token in the metadata, failures as typed HostApiErrors.
 */

type Kind = 'struct' | 'structs' | 'value';
type Fields = Record<string, Kind>;
const MODEL_REQUEST: Fields = { messages: 'structs', tools: 'structs', extra_args: 'struct' };

/** Which fields of each request and response are Struct (one or repeated) or Value. */
const CODEC: Record<UnaryMethod | 'StreamModel', { req?: Fields; res?: Fields }> = {
  InvokeModel: { req: MODEL_REQUEST, res: { message: 'struct', usage: 'struct' } },
  StreamModel: { req: MODEL_REQUEST, res: { chunk: 'struct', usage: 'struct' } },
  CountTokens: { req: { messages: 'structs', tools: 'structs' } },
  Rerank: { req: { extra_args: 'struct' } },
  GetToolDetail: { res: { tool: 'struct' } },
  CallTool: { req: { parameters: 'struct' }, res: { result: 'struct' } },
  RetrieveKnowledge: { req: { filters: 'struct' }, res: { results: 'structs' } },
  HistoryPage: { res: { items: 'structs' } },
  HistorySearch: { req: { filters: 'struct' }, res: { items: 'structs' } },
  EventGet: { res: { event: 'struct' } },
  EventPage: { res: { items: 'structs' } },
  StateGet: { res: { value: 'value' } },
  StateSet: { req: { value: 'value' } },
  StateDelete: {},
  StateList: {},
  StorageGet: {},
  StorageSet: {},
  StorageDelete: {},
  StorageList: {},
  PromptGet: { res: { prompt: 'structs' } },
  SteeringPull: { res: { items: 'structs' } },
  RunGet: {},
};

function encode(message: object, fields: Fields | undefined): object {
  if (!fields) {
    return message; // no Struct or Value field: the loader's encoder takes the plain fields (and skips undefined ones)
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(message)) {
    if (value === undefined) {
      continue;
    }
    const kind = fields?.[key];
    if (kind === 'struct') {
      out[key] = toStruct(value as Record<string, unknown>);
    } else if (kind === 'structs') {
      out[key] = (value as Record<string, unknown>[]).map((v) => toStruct(v));
    } else if (kind === 'value') {
      out[key] = toValue(value);
    } else {
      out[key] = value;
    }
  }
  return out;
}

function decode(message: Record<string, unknown>, fields: Fields | undefined): Record<string, unknown> {
  if (!fields) {
    return message;
  }
  const out = { ...message };
  for (const [key, kind] of Object.entries(fields)) {
    const value = message[key];
    if (kind === 'struct') {
      out[key] = fromStructOrNull(value as WireStruct | null);
    } else if (kind === 'structs') {
      out[key] = ((value as WireStruct[] | null) ?? []).map((v) => fromStructOrNull(v) ?? {});
    } else {
      out[key] = value ? fromValue(value) : null;
    }
  }
  return out;
}

/** An answer as proto-loader gives it (requests go as any object the loader encodes) (Structs as WireStruct, json.ts). */
type WireMessage = Record<string, unknown>;

/** Each host-API method's path, encoder and decoder, looked up once. */
const methods = new Map<UnaryMethod | 'StreamModel', WireMethod<object, WireMessage>>();
function methodOf(method: UnaryMethod | 'StreamModel'): WireMethod<object, WireMessage> {
  let wire = methods.get(method);
  if (!wire) {
    wire = wireMethod<object, WireMessage>(loadServices().HostApiService, method);
    methods.set(method, wire);
  }
  return wire;
}

export class GrpcHostApiTransport implements HostApiTransport {
  private client: grpc.Client | undefined;
  /** The call metadata without a traceparent, built once (see metadata()). */
  private plain: grpc.Metadata | undefined;
  /** The call metadata of the last traceparent seen (a run's calls all carry the run's). */
  private traced: { traceparent: string; metadata: grpc.Metadata } | undefined;

  constructor(
    private readonly url: string,
    private readonly token: string,
    private readonly credentials: grpc.ChannelCredentials,
  ) {}

  unary<M extends UnaryMethod>(method: M, request: RequestOf<M>, options: CallOptions): Promise<ResponseOf<M>> {
    const { signal } = options;
    if (signal?.aborted) {
      return Promise.reject(abortReasonOf(signal));
    }
    const client = this.getClient();
    const wire = methodOf(method);
    return new Promise<ResponseOf<M>>((resolve, reject) => {
      const call = client.makeUnaryRequest(
        wire.path,
        wire.serialize,
        wire.deserialize,
        encode(request, CODEC[method].req),
        this.metadata(options.traceparent),
        { deadline: options.deadline },
        (err, response) => {
          unwatch();
          if (signal?.aborted) {
            reject(abortReasonOf(signal));
          } else if (err) {
            reject(hostApiErrorFromGrpc(method, err));
          } else {
            resolve(decodedAs<ResponseOf<M>>(decode(response ?? {}, CODEC[method].res)));
          }
        },
      );
      // One listener on the run's signal for all its calls in flight (abort.ts), removed as each settles.
      const unwatch = watchAbort(signal, () => {
        call.cancel();
        reject(abortReasonOf(signal));
      });
    });
  }

  async *streamModel(request: InvokeModelRequest, options: CallOptions): AsyncIterable<StreamModelItem> {
    const { signal } = options;
    if (signal?.aborted) {
      throw abortReasonOf(signal);
    }
    const client = this.getClient();
    const wire = methodOf('StreamModel');
    const call = client.makeServerStreamRequest(
      wire.path,
      wire.serialize,
      wire.deserialize,
      encode(request, CODEC.StreamModel.req),
      this.metadata(options.traceparent),
      { deadline: options.deadline },
    );
    const unwatch = watchAbort(signal, () => call.cancel());
    try {
      for await (const item of call as AsyncIterable<WireMessage>) {
        yield decodedAs<StreamModelItem>(decode(item, CODEC.StreamModel.res));
      }
    } catch (err) {
      if (signal?.aborted) {
        throw abortReasonOf(signal);
      }
      throw hostApiErrorFromGrpc('StreamModel', err as grpc.ServiceError);
    } finally {
      unwatch();
      call.cancel(); // a consumer that stops early ends the call
    }
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }

  /**
   * The metadata of a call: the plugin token, and the run's traceparent (the host's spans of the
   * call join the run's trace). Built once and shared by the calls that send the same: grpc-js
   * copies a call's metadata when the call starts (and adds its own headers to the copy), so one
   * object serves them all instead of a new Metadata per call with grpc-js's check of each header
   * (docs/runner-sdk.md#performance). grpc-transport.spec.ts
   * checks that the host receives the token and each call's traceparent, and that the shared object
   * is left as built.
   */
  private metadata(traceparent?: string): grpc.Metadata {
    if (!traceparent) {
      return (this.plain ??= this.build());
    }
    if (this.traced?.traceparent !== traceparent) {
      this.traced = { traceparent, metadata: this.build(traceparent) };
    }
    return this.traced.metadata;
  }

  private build(traceparent?: string): grpc.Metadata {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${this.token}`);
    if (traceparent) {
      metadata.set('traceparent', traceparent);
    }
    return metadata;
  }

  /** Created on the first call: a runner that never calls the host API never opens the client. */
  private getClient(): grpc.Client {
    if (!this.client) {
      const { HostApiService } = loadServices();
      this.client = new HostApiService(this.url, this.credentials, CHANNEL_OPTIONS);
    }
    return this.client;
  }
}
