import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/*
 * A small raw client of runnerhost.v1.HostApiService for the e2e tests: plain proto-loader on the
 * .proto file (no code shared with the host), promisified unary calls that never throw, and
 * google.protobuf.Struct / Value fields converted from and to plain JSON.
 *
 * Without `oneofs`, a decoded Value carries only the member that is set
 * (`{stringValue: 'x'}`), and unset `optional` fields are absent.
 */

const PROTO = path.resolve(__dirname, '..', '..', 'proto');
const def = protoLoader.loadSync(['runnerhost/v1/host_api.proto'], {
  includeDirs: [PROTO],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: false,
});
const pkg = grpc.loadPackageDefinition(def) as any;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

// ---- Struct / Value (protobufjs object form, camelCase member names) ----

export function toValue(v: unknown): unknown {
  if (v === null || v === undefined) {
    return { nullValue: 'NULL_VALUE' };
  }
  if (Array.isArray(v)) {
    return { listValue: { values: v.map(toValue) } };
  }
  if (typeof v === 'string') {
    return { stringValue: v };
  }
  if (typeof v === 'number') {
    return { numberValue: v };
  }
  if (typeof v === 'boolean') {
    return { boolValue: v };
  }
  if (typeof v === 'object') {
    return { structValue: toStruct(v as Record<string, unknown>) };
  }
  throw new TypeError(`cannot encode a ${typeof v} as google.protobuf.Value`);
}

export function toStruct(obj: Record<string, unknown>): unknown {
  return { fields: Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, toValue(v)])) };
}

export function fromValue(v: any): Json {
  if (v === null || v === undefined || 'nullValue' in v) {
    return null;
  }
  if ('stringValue' in v) {
    return v.stringValue;
  }
  if ('numberValue' in v) {
    return v.numberValue;
  }
  if ('boolValue' in v) {
    return v.boolValue;
  }
  if ('structValue' in v) {
    return fromStruct(v.structValue);
  }
  if ('listValue' in v) {
    return ((v.listValue?.values ?? []) as unknown[]).map(fromValue);
  }
  return null;
}

export function fromStruct(s: any): JsonObject {
  return Object.fromEntries(
    Object.entries((s?.fields ?? {}) as Record<string, unknown>).map(([k, v]) => [k, fromValue(v)]),
  );
}

// ---- the RPCs, as plain JSON ----

export interface TranscriptItem {
  transcript_id: string;
  event_id: string | null;
  conversation_id: string;
  thread_id: string | null;
  role: string;
  item_type: string;
  content: string;
  content_json: JsonObject;
  attachment_refs: JsonObject[];
  seq: number;
  cursor: string;
  created_at: number;
  metadata: JsonObject;
  run_id: string | null;
}

export interface EventRecord {
  event_id: string;
  event_type: string;
  source: string;
  conversation_id: string | null;
  thread_id: string | null;
  actor_type: string | null;
  actor_id: string | null;
  subject_type: string | null;
  subject_id: string | null;
  input_summary: string;
  seq: number;
  cursor: string;
  metadata: JsonObject;
  run_id: string | null;
  [key: string]: Json;
}

interface RunRef {
  run_id: string;
}

/** Request and response of each unary RPC, with Struct/Value fields as plain JSON. */
export interface HostApiRpcs {
  InvokeModel: {
    req: RunRef & { model_id: string; messages?: JsonObject[]; tools?: JsonObject[]; extra_args?: JsonObject };
    res: { message: JsonObject; usage: JsonObject };
  };
  CountTokens: { req: RunRef & { model_id: string; messages?: JsonObject[] }; res: { tokens: number } };
  Rerank: {
    req: RunRef & { model_id: string; query: string; documents: string[] };
    res: { results: { index: number; relevance_score: number }[] };
  };
  GetToolDetail: { req: RunRef & { tool_name: string }; res: { tool: JsonObject } };
  CallTool: { req: RunRef & { tool_name: string; parameters?: JsonObject }; res: { result: JsonObject } };
  RetrieveKnowledge: {
    req: RunRef & { kb_id: string; query_text: string; top_k?: number; filters?: JsonObject };
    res: { results: JsonObject[] };
  };
  HistoryPage: {
    req: RunRef & {
      conversation_id?: string;
      before_cursor?: string;
      after_cursor?: string;
      limit?: number;
      direction?: string;
      include_attachments?: boolean;
    };
    res: { items: TranscriptItem[]; next_cursor?: string; prev_cursor?: string; has_more: boolean };
  };
  HistorySearch: {
    req: RunRef & { query: string; filters?: JsonObject; top_k?: number };
    res: { items: TranscriptItem[]; total_count: number; query: string };
  };
  EventGet: { req: RunRef & { event_id: string }; res: { event: EventRecord } };
  EventPage: {
    req: RunRef & { conversation_id?: string; event_types?: string[]; before_cursor?: string; limit?: number };
    res: { items: EventRecord[]; next_cursor?: string; has_more: boolean };
  };
  StateGet: { req: RunRef & { scope: string; key: string }; res: { value: Json } };
  StateSet: { req: RunRef & { scope: string; key: string; value: Json }; res: { success: boolean } };
  StateDelete: { req: RunRef & { scope: string; key: string }; res: { success: boolean } };
  StateList: {
    req: RunRef & { scope: string; prefix?: string; limit?: number };
    res: { keys: string[]; has_more: boolean };
  };
  StorageGet: { req: RunRef & { area: string; key: string }; res: { value: Buffer } };
  StorageSet: { req: RunRef & { area: string; key: string; value: Buffer }; res: Record<string, never> };
  StorageDelete: { req: RunRef & { area: string; key: string }; res: { success: boolean } };
  StorageList: {
    req: RunRef & { area: string; prefix?: string; limit?: number };
    res: { keys: string[]; has_more: boolean };
  };
  PromptGet: { req: RunRef; res: { prompt: JsonObject[] } };
  SteeringPull: { req: RunRef & { mode?: string; limit?: number }; res: { items: JsonObject[] } };
  RunGet: {
    req: RunRef;
    res: {
      run_id: string;
      status: string;
      status_reason?: string;
      cancel_requested: boolean;
      deadline_at?: number;
      started_at?: number;
    };
  };
}

export type HostApiMethod = keyof HostApiRpcs;

/** Which fields hold a Struct, a list of Structs or a Value, in requests and in responses. */
interface Codec {
  struct?: string[];
  structs?: string[];
  value?: string[];
}
const REQUEST_CODECS: Partial<Record<HostApiMethod, Codec>> = {
  InvokeModel: { structs: ['messages', 'tools'], struct: ['extra_args'] },
  CountTokens: { structs: ['messages', 'tools'] },
  CallTool: { struct: ['parameters'] },
  RetrieveKnowledge: { struct: ['filters'] },
  HistorySearch: { struct: ['filters'] },
  StateSet: { value: ['value'] },
};
const RESPONSE_CODECS: Partial<Record<HostApiMethod, Codec>> = {
  InvokeModel: { struct: ['message', 'usage'] },
  GetToolDetail: { struct: ['tool'] },
  CallTool: { struct: ['result'] },
  RetrieveKnowledge: { structs: ['results'] },
  HistoryPage: { structs: ['items'] },
  HistorySearch: { structs: ['items'] },
  EventGet: { struct: ['event'] },
  EventPage: { structs: ['items'] },
  StateGet: { value: ['value'] },
  PromptGet: { structs: ['prompt'] },
  SteeringPull: { structs: ['items'] },
};

function convert(msg: Record<string, any>, codec: Codec | undefined, dir: 'encode' | 'decode'): Record<string, any> {
  if (!codec) {
    return msg;
  }
  const out = { ...msg };
  const struct = dir === 'encode' ? toStruct : fromStruct;
  const value = dir === 'encode' ? toValue : fromValue;
  for (const f of codec.struct ?? []) {
    if (out[f] !== undefined && out[f] !== null) {
      out[f] = struct(out[f]);
    }
  }
  for (const f of codec.structs ?? []) {
    if (Array.isArray(out[f])) {
      out[f] = out[f].map((s: any) => struct(s));
    }
  }
  for (const f of codec.value ?? []) {
    if (dir === 'encode' ? out[f] !== undefined : true) {
      out[f] = value(out[f]);
    }
  }
  return out;
}

export interface RpcError {
  code: grpc.status;
  /** The protocol error code from the trailing metadata `x-error-code`. */
  xcode: string | undefined;
  details: string;
}

export type RpcResult<T> = { res: T; err?: undefined } | { res?: undefined; err: RpcError };

export interface CallOptions {
  /** The plugin token sent as `authorization: Bearer <token>`; null sends no authorization. */
  token?: string | null;
  /** A raw `authorization` header value (wins over `token`). */
  authorization?: string;
  /** Send the request as it is (no Struct/Value encoding). */
  raw?: boolean;
}

const CALL_DEADLINE_MS = 20_000;

export class HostApiClient {
  private readonly client: any;

  /** `token`: the default caller (a plugin token). */
  constructor(
    address: string,
    private readonly token: string | null,
  ) {
    this.client = new pkg.runnerhost.v1.HostApiService(address, grpc.credentials.createInsecure());
  }

  private metadata(opts: CallOptions): grpc.Metadata {
    const md = new grpc.Metadata();
    const token = opts.token === undefined ? this.token : opts.token;
    if (opts.authorization !== undefined) {
      md.set('authorization', opts.authorization);
    } else if (token) {
      md.set('authorization', `Bearer ${token}`);
    }
    return md;
  }

  /** One unary call; resolves with `{res}` or `{err: {code, xcode, details}}`, never rejects. */
  call<M extends HostApiMethod>(
    method: M,
    req: HostApiRpcs[M]['req'],
    opts: CallOptions = {},
  ): Promise<RpcResult<HostApiRpcs[M]['res']>> {
    const body = opts.raw ? req : convert(req, REQUEST_CODECS[method], 'encode');
    const deadline = new Date(Date.now() + CALL_DEADLINE_MS);
    return new Promise((resolve) => {
      this.client[method](body, this.metadata(opts), { deadline }, (e: grpc.ServiceError | null, res: any) => {
        if (e) {
          resolve({ err: errorOf(e) });
        } else {
          resolve({ res: convert(res, RESPONSE_CODECS[method], 'decode') as HostApiRpcs[M]['res'] });
        }
      });
    });
  }

  /** StreamModel (server streaming): every chunk, or the error status that ended the stream. */
  streamModel(req: HostApiRpcs['InvokeModel']['req'], opts: CallOptions = {}): Promise<RpcResult<JsonObject[]>> {
    const body = convert(req, REQUEST_CODECS.InvokeModel, 'encode');
    const call = this.client.StreamModel(body, this.metadata(opts), {
      deadline: new Date(Date.now() + CALL_DEADLINE_MS),
    });
    const chunks: JsonObject[] = [];
    return new Promise((resolve) => {
      call.on('data', (c: any) => chunks.push(fromStruct(c.chunk)));
      call.on('error', (e: grpc.ServiceError) => resolve({ err: errorOf(e) }));
      call.on('end', () => resolve({ res: chunks }));
    });
  }

  close(): void {
    this.client.close();
  }
}

function errorOf(e: grpc.ServiceError): RpcError {
  const x = e.metadata?.get('x-error-code')[0];
  return { code: e.code, xcode: x === undefined ? undefined : String(x), details: e.details };
}
