import type { PackageDefinition } from '@grpc/proto-loader';
import { Reader, util } from 'protobufjs';

/*
 * A runner's results (`PluginMessage.result` / `.results`, every result of every run) decoded
 * straight into the plain object proto-loader's deserializer gives (LOADER_OPTIONS: `toObject` with
 * defaults, oneof keys and int64 as numbers; Structs as plain JSON by json-wrappers.ts), without
 * the protobufjs message tree it decodes first and then copies
 * (docs/benchmarks.md#host-cpu-per-run-at-c64-issue-16-round-5-wt-hostcpu). Only the messages
 * whose every field is one this decoder reads exactly as protobufjs does take this path; anything
 * else — another message, an unknown field, a wire type not the declared one, a `__proto__` key,
 * truncated bytes — is decoded by the deserializer it replaces, so the result (or its error) is
 * that deserializer's.
 */

const FALLBACK = new Error('not decoded directly');

/** A wire-type check: protobufjs reads a field by its declared type whatever the tag says. */
function expect(tag: number, wire: number): void {
  if ((tag & 7) !== wire) {
    throw FALLBACK;
  }
}

/** Nesting deeper than this goes to protobufjs (its own limit, Reader.recursionLimit, is 100). */
const MAX_DEPTH = 64;

/**
 * A length-delimited part read as protobufjs 7's generated decoders read one: the reader's limit
 * set to the part's end (a string inside is cut there), the part ending exactly at it.
 */
function nested<T>(r: Reader, depth: number, body: (r: Reader, end: number, depth: number) => T): T {
  if (depth > MAX_DEPTH) {
    throw FALLBACK;
  }
  const end = r.uint32() + r.pos;
  if (end > r.len) {
    throw FALLBACK;
  }
  const outer = r.len;
  r.len = end;
  const out = body(r, end, depth);
  if (r.pos !== end) {
    throw FALLBACK;
  }
  r.len = outer;
  return out;
}

function int64(r: Reader): number {
  // protobufjs gives a Long when the `long` package is there, a number otherwise.
  const v: number | { low: number; high: number } = r.int64();
  return typeof v === 'number' ? v : new util.LongBits(v.low >>> 0, v.high >>> 0).toNumber();
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** google.protobuf.Value as json-wrappers.ts's `toObject` reads it (struct, list, string, number, bool, else null). */
function value(r: Reader, end: number, depth: number): Json {
  let struct: Record<string, Json> | undefined;
  let list: Json[] | undefined;
  let string: string | undefined;
  let number: number | undefined;
  let bool: boolean | undefined;
  while (r.pos < end) {
    const tag = r.uint32();
    switch (tag >>> 3) {
      case 1:
        expect(tag, 0);
        r.int32();
        break;
      case 2:
        expect(tag, 1);
        number = r.double();
        break;
      case 3:
        expect(tag, 2);
        string = r.string();
        break;
      case 4:
        expect(tag, 0);
        bool = r.bool();
        break;
      case 5:
        expect(tag, 2);
        struct = nested(r, depth + 1, structOf);
        break;
      case 6:
        expect(tag, 2);
        list = nested(r, depth + 1, listOf);
        break;
      default:
        throw FALLBACK;
    }
  }
  return struct ?? list ?? string ?? number ?? bool ?? null;
}

/** One map entry of a Struct: [key, value]. */
function entry(r: Reader, end: number, depth: number): [string, Json] {
  let key = '';
  let v: Json | undefined;
  while (r.pos < end) {
    const t = r.uint32();
    if (t === 10) {
      key = r.string();
    } else if (t === 18) {
      v = nested(r, depth + 1, value);
    } else {
      throw FALLBACK;
    }
  }
  // An entry without a value makes the wrapper throw; `__proto__` is a key protobufjs treats apart.
  if (v === undefined || key === '__proto__') {
    throw FALLBACK;
  }
  return [key, v];
}

function structOf(r: Reader, end: number, depth: number): Record<string, Json> {
  const out: Record<string, Json> = {};
  while (r.pos < end) {
    if (r.uint32() !== 10) {
      throw FALLBACK;
    }
    const [key, v] = nested(r, depth, entry);
    out[key] = v;
  }
  return out;
}

function listOf(r: Reader, end: number, depth: number): Json[] {
  const out: Json[] = [];
  while (r.pos < end) {
    if (r.uint32() !== 10) {
      throw FALLBACK;
    }
    out.push(nested(r, depth + 1, value));
  }
  return out;
}

interface WireResult {
  run_id: string;
  type: string;
  data: Record<string, Json> | null;
  usage: Record<string, Json> | null;
  sequence?: number;
  _sequence?: 'sequence';
  timestamp?: number;
  _timestamp?: 'timestamp';
}

/** RunResult, keys in `toObject`'s order: the defaulted fields, then the optional ones present. */
function runResult(r: Reader, end: number, depth: number): WireResult {
  const out: WireResult = { run_id: '', type: '', data: null, usage: null };
  let sequence: number | undefined;
  let timestamp: number | undefined;
  while (r.pos < end) {
    const tag = r.uint32();
    switch (tag >>> 3) {
      case 1:
        expect(tag, 2);
        out.run_id = r.string();
        break;
      case 2:
        expect(tag, 2);
        out.type = r.string();
        break;
      case 3:
        expect(tag, 2);
        out.data = nested(r, depth + 1, structOf);
        break;
      case 4:
        expect(tag, 2);
        out.usage = nested(r, depth + 1, structOf);
        break;
      case 5:
        expect(tag, 0);
        sequence = int64(r);
        break;
      case 6:
        expect(tag, 0);
        timestamp = int64(r);
        break;
      default:
        throw FALLBACK;
    }
  }
  if (sequence !== undefined) {
    out.sequence = sequence;
    out._sequence = 'sequence';
  }
  if (timestamp !== undefined) {
    out.timestamp = timestamp;
    out._timestamp = 'timestamp';
  }
  return out;
}

function resultBatch(r: Reader, end: number, depth: number): { results: WireResult[] } {
  const results: WireResult[] = [];
  while (r.pos < end) {
    if (r.uint32() !== 10) {
      throw FALLBACK;
    }
    results.push(nested(r, depth + 1, runResult));
  }
  return { results };
}

/** A PluginMessage that is one `result` or one `results` batch, decoded directly; else FALLBACK. */
function pluginResults(bytes: Buffer): object {
  const r = Reader.create(bytes);
  const tag = r.uint32();
  let out: object;
  if (tag === 18) {
    out = { result: nested(r, 1, runResult), msg: 'result' };
  } else if (tag === 42) {
    out = { results: nested(r, 1, resultBatch), msg: 'results' };
  } else {
    throw FALLBACK;
  }
  // One field, the whole message: anything after it goes to protobufjs.
  if (r.pos !== bytes.length) {
    throw FALLBACK;
  }
  return out;
}

/** Results by the direct decoder, everything else (and anything it does not read) by `fallback`. */
export function directResultDeserializer(fallback: (bytes: Buffer) => object): (bytes: Buffer) => object {
  return (bytes) => {
    try {
      return pluginResults(bytes);
    } catch {
      return fallback(bytes);
    }
  };
}

/**
 * Swaps the Connect stream's request deserializer for the direct one. Call it before
 * tolerateMalformedRequests, which then wraps it (a message neither decodes stays malformed).
 */
export function decodeResultsDirectly(definition: PackageDefinition): void {
  const service = definition['runnerhost.v1.RunnerGatewayService'];
  if (!service || 'format' in service || !service.Connect) {
    throw new Error('runnerhost.v1.RunnerGatewayService.Connect is not in the package definition');
  }
  service.Connect.requestDeserialize = directResultDeserializer(service.Connect.requestDeserialize);
}
