import * as grpc from '@grpc/grpc-js';
import * as fc from 'fast-check';
import { DEEP, extremeNumber, jsonValue, nastyString } from './arbitraries';

// Generators of gRPC requests: well-formed messages with hostile field values, and raw bytes.

/** Deep markers become real nested objects here (Struct encoding needs objects), capped for the client's own stack. */
function realise(v: unknown): unknown {
  if (typeof v === 'string' && v.startsWith(DEEP)) {
    const levels = Math.min(Number(v.slice(DEEP.length, -2)), 400);
    let out: unknown = 1;
    for (let i = 0; i < levels; i++) {
      out = { a: out };
    }
    return out;
  }
  return v;
}

const structValue = jsonValue
  .map(realise)
  .map((v) => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v : { v }));

/** A value of the same shape as `sample` (the field's proto type), hostile where it can be. */
function like(sample: unknown): fc.Arbitrary<unknown> {
  if (typeof sample === 'string') {
    return nastyString;
  }
  if (typeof sample === 'number') {
    return extremeNumber;
  }
  if (typeof sample === 'boolean') {
    return fc.boolean();
  }
  if (Buffer.isBuffer(sample)) {
    return fc.uint8Array({ maxLength: 2048 }).map((a) => Buffer.from(a));
  }
  if (Array.isArray(sample)) {
    return typeof sample[0] === 'string'
      ? fc.array(nastyString, { maxLength: 5 })
      : fc.array(structValue, { maxLength: 3 });
  }
  return structValue;
}

/** The template with some fields replaced by hostile values of their type, or left out. */
export function typedMutation(template: Record<string, unknown>): fc.Arbitrary<Record<string, unknown>> {
  const keys = Object.keys(template);
  const changes = keys.map((k) => fc.option(fc.oneof(like(template[k]), fc.constant(undefined)), { freq: 2 }));
  return fc.tuple(...changes).map((vals) => {
    const out: Record<string, unknown> = { ...template };
    vals.forEach((v, i) => {
      if (v === null) {
        return; // unchanged
      }
      if (v === undefined) {
        delete out[keys[i]];
      } else {
        out[keys[i]] = v;
      }
    });
    return out;
  });
}

/** A plausible request per HostApiService unary method, for the run `runId`. */
export function hostApiTemplates(runId: string): Record<string, Record<string, unknown>> {
  const msg = { role: 'user', content: 'hi' };
  return {
    InvokeModel: { run_id: runId, model_id: 'm', messages: [msg], tools: [], extra_args: { t: 1 } },
    CountTokens: { run_id: runId, model_id: 'm', messages: [msg] },
    Rerank: { run_id: runId, model_id: 'm', query: 'q', documents: ['a', 'b'] },
    GetToolDetail: { run_id: runId, tool_name: 't' },
    CallTool: { run_id: runId, tool_name: 't', parameters: { a: 1 } },
    RetrieveKnowledge: { run_id: runId, kb_id: 'kb', query_text: 'q', top_k: 3, filters: {} },
    HistoryPage: { run_id: runId, conversation_id: 'c', before_cursor: '1', limit: 10, direction: 'backward' },
    HistorySearch: { run_id: runId, query: 'q', filters: {}, top_k: 3 },
    EventGet: { run_id: runId, event_id: 'e' },
    EventPage: {
      run_id: runId,
      conversation_id: 'c',
      event_types: ['message.received'],
      before_cursor: '1',
      limit: 10,
    },
    StateGet: { run_id: runId, scope: 'conversation', key: 'k' },
    StateSet: { run_id: runId, scope: 'conversation', key: 'k', value: { v: 1 } },
    StateDelete: { run_id: runId, scope: 'conversation', key: 'k' },
    StateList: { run_id: runId, scope: 'conversation', prefix: '', limit: 10 },
    StorageGet: { run_id: runId, area: 'plugin', key: 'k' },
    StorageSet: { run_id: runId, area: 'plugin', key: 'k', value: Buffer.from('v') },
    StorageDelete: { run_id: runId, area: 'plugin', key: 'k' },
    StorageList: { run_id: runId, area: 'plugin', prefix: '', limit: 10 },
    PromptGet: { run_id: runId },
    SteeringPull: { run_id: runId, mode: 'all', limit: 10 },
    RunGet: { run_id: runId },
  };
}

export const ALL_HOST_API_METHODS = [...Object.keys(hostApiTemplates('x')), 'StreamModel'];

/** Bytes no protobuf encoder would write: random, truncated, wrong wire types, bad UTF-8, huge lengths. */
export const garbageBytes: fc.Arbitrary<Buffer> = fc
  .oneof(
    fc.uint8Array({ maxLength: 512 }).map((a) => Array.from(a)),
    fc.constantFrom(
      [0x0a, 0x02, 0xff, 0xfe], // run_id: invalid UTF-8
      [0x0a, 0x03, 0xed, 0xa0, 0x80], // run_id: an encoded lone surrogate
      [0x08, 0xff], // truncated varint
      [0x0d, 1, 2, 3, 4], // field 1 as fixed32
      [0x0a, 0xff, 0xff, 0xff, 0x0f], // a 4 GiB length prefix
      [0x0b], // start group, never ended
      [0x0a, 0x00, 0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], // 11-byte varint
      Array.from({ length: 2000 }, (_, i) => (i % 2 === 0 ? 0x1a : 0x7f)), // nested lengths
    ),
  )
  .map((a) => Buffer.from(a));

/** Whether a status is a defect of the host: INTERNAL or UNKNOWN (client-side serialisation failures excluded). */
export function isHostFault(e: { code: grpc.status; details: string } | undefined): boolean {
  if (!e) {
    return false;
  }
  if (/serializ/i.test(e.details)) {
    return false; // the test client could not encode its own message: it never reached the host
  }
  return e.code === grpc.status.INTERNAL || e.code === grpc.status.UNKNOWN;
}
