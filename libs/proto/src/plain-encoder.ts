import * as fs from 'node:fs';
import * as path from 'node:path';
import { Root, Writer, types, type Field, type Type } from 'protobufjs';
import { protoRoot } from './proto-path';

/*
 * A plain object (the ts-proto shapes, google.protobuf.Struct fields as plain JSON) written as
 * protobuf bytes directly, without the message tree proto-loader's serializer builds first with
 * `fromObject` (docs/benchmarks.md#host-cpu-per-run-at-c64-issue-16-round-5-wt-hostcpu). The bytes
 * are those of `Type.encode(Type.fromObject(value))` with the JSON wrappers of json-wrappers.ts:
 * fields in field-number order, a field written when its value is not null/undefined (an empty
 * repeated field never), Struct keys in their object order. Whatever that conversion would coerce
 * or refuse (a number in a string field, a non-integer in an int32, an enum, a map, bytes, a
 * protobufjs message, a key named `$type`) is not written here: `encodePlain` throws NOT_PLAIN
 * and the caller encodes that value the old way.
 */

/** Thrown when a value is not one this encoder writes byte for byte as fromObject + encode would. */
export const NOT_PLAIN = new Error('not a plain value for the direct encoder');

const STRUCT = '.google.protobuf.Struct';
const VALUE = '.google.protobuf.Value';
const LIST = '.google.protobuf.ListValue';

type Scalar =
  | 'double'
  | 'float'
  | 'int32'
  | 'uint32'
  | 'sint32'
  | 'fixed32'
  | 'sfixed32'
  | 'int64'
  | 'uint64'
  | 'sint64'
  | 'fixed64'
  | 'sfixed64'
  | 'bool'
  | 'string';

interface FieldPlan {
  name: string;
  /** The key's varint: (id << 3 | wire type). */
  tag: number;
  repeated: boolean;
  /** Packed repeated scalar: one length-delimited record (tag with wire type 2). */
  packed: boolean;
  kind: 'scalar' | 'message' | 'struct' | 'value' | 'list';
  scalar?: Scalar;
  message?: TypePlan;
}

interface TypePlan {
  fields: FieldPlan[];
}

const SCALARS = new Set<string>([
  'double',
  'float',
  'int32',
  'uint32',
  'sint32',
  'fixed32',
  'sfixed32',
  'int64',
  'uint64',
  'sint64',
  'fixed64',
  'sfixed64',
  'bool',
  'string',
]);

function planOf(type: Type, plans: Map<Type, TypePlan>): TypePlan {
  let plan = plans.get(type);
  if (plan) {
    return plan;
  }
  plan = { fields: [] };
  plans.set(type, plan);
  type.resolveAll();
  const fields = [...type.fieldsArray].sort((a, b) => a.id - b.id);
  for (const f of fields) {
    plan.fields.push(fieldPlan(f, plans));
  }
  return plan;
}

function fieldPlan(f: Field, plans: Map<Type, TypePlan>): FieldPlan {
  if (f.map) {
    throw new Error(`${f.fullName}: map fields are not written by the direct encoder`);
  }
  const resolved = f.resolvedType;
  if (resolved && 'fieldsArray' in resolved) {
    const message = resolved;
    const kind =
      message.fullName === STRUCT
        ? 'struct'
        : message.fullName === VALUE
          ? 'value'
          : message.fullName === LIST
            ? 'list'
            : 'message';
    return {
      name: f.name,
      tag: ((f.id << 3) | 2) >>> 0,
      repeated: f.repeated,
      packed: false,
      kind,
      message: kind === 'message' ? planOf(message, plans) : undefined,
    };
  }
  if (resolved || !SCALARS.has(f.type)) {
    throw new Error(`${f.fullName}: ${f.type} fields are not written by the direct encoder`);
  }
  const scalar = f.type as Scalar;
  const wire = (types.basic as Record<string, number>)[scalar];
  const packed = f.repeated && f.packed && (types.packed as Record<string, number | undefined>)[scalar] !== undefined;
  return {
    name: f.name,
    tag: ((f.id << 3) | (packed ? 2 : wire)) >>> 0,
    repeated: f.repeated,
    packed,
    kind: 'scalar',
    scalar,
  };
}

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

/** One scalar as fromObject would store it unchanged (else NOT_PLAIN) and encode would write it. */
function writeScalar(w: Writer, scalar: Scalar, v: unknown): void {
  switch (scalar) {
    case 'string':
      if (typeof v !== 'string') {
        throw NOT_PLAIN;
      }
      w.string(v);
      return;
    case 'bool':
      if (typeof v !== 'boolean') {
        throw NOT_PLAIN;
      }
      w.bool(v);
      return;
    case 'double':
    case 'float':
      if (typeof v !== 'number') {
        throw NOT_PLAIN;
      }
      w[scalar](v);
      return;
    case 'int32':
    case 'sint32':
    case 'sfixed32':
      if (typeof v !== 'number' || !Number.isInteger(v) || v < INT32_MIN || v > INT32_MAX) {
        throw NOT_PLAIN;
      }
      w[scalar](v);
      return;
    case 'uint32':
    case 'fixed32':
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff) {
        throw NOT_PLAIN;
      }
      w[scalar](v);
      return;
    case 'int64':
    case 'sint64':
    case 'sfixed64':
      // fromObject makes a Long of it; for a safe integer the bytes are the number's own.
      if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
        throw NOT_PLAIN;
      }
      w[scalar](v);
      return;
    case 'uint64':
    case 'fixed64':
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
        throw NOT_PLAIN;
      }
      w[scalar](v);
      return;
  }
}

/** A plain object that fromObject would take as it is: not a protobufjs message, no `$type` key. */
function plainObject(v: unknown): object {
  if (typeof v !== 'object' || v === null || '$type' in v) {
    throw NOT_PLAIN;
  }
  return v;
}

/**
 * A message's fields written by a function generated once per type, with each field's name as a
 * literal: the loads stay monomorphic per field site (a loop over the plan's names would make one
 * megamorphic keyed load of them all, slower than fromObject + encode).
 */
type MessageWriter = (w: Writer, object: Record<string, unknown>) => void;

interface Helpers {
  field: (w: Writer, f: FieldPlan, v: unknown) => void;
  repeated: (w: Writer, f: FieldPlan, v: unknown) => void;
  fields: FieldPlan[];
}

function compile(plan: TypePlan): MessageWriter {
  const lines = plan.fields.map((f, i) => {
    const name = JSON.stringify(f.name);
    return f.repeated
      ? `v = o[${name}]; if (v !== null && v !== undefined) h.repeated(w, h.fields[${i}], v);`
      : `v = o[${name}]; if (v !== null && v !== undefined) h.field(w, h.fields[${i}], v);`;
  });
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- generated from the .proto field names (JSON-quoted), as protobufjs generates its own encoders
  const make = new Function('h', `return function (w, o) { var v; ${lines.join(' ')} };`) as (
    h: Helpers,
  ) => MessageWriter;
  return make({ field: writeField, repeated: writeRepeated, fields: plan.fields });
}

const writers = new WeakMap<TypePlan, MessageWriter>();

function writeMessage(w: Writer, plan: TypePlan, value: object): void {
  let write = writers.get(plan);
  if (write === undefined) {
    write = compile(plan);
    writers.set(plan, write);
  }
  write(w, value as Record<string, unknown>);
}

function writeRepeated(w: Writer, f: FieldPlan, v: unknown): void {
  if (!Array.isArray(v)) {
    throw NOT_PLAIN;
  }
  if (v.length === 0) {
    return;
  }
  if (f.packed) {
    w.uint32(f.tag).fork();
    for (let i = 0; i < v.length; i++) {
      writeScalar(w, f.scalar!, v[i]);
    }
    w.ldelim();
    return;
  }
  for (let i = 0; i < v.length; i++) {
    // fromObject converts each element; a null one it cannot (it throws or stores a default).
    if (!(i in v) || v[i] === null || v[i] === undefined) {
      throw NOT_PLAIN;
    }
    writeField(w, f, v[i]);
  }
}

function writeField(w: Writer, f: FieldPlan, v: unknown): void {
  w.uint32(f.tag);
  switch (f.kind) {
    case 'scalar':
      writeScalar(w, f.scalar!, v);
      return;
    case 'message':
      w.fork();
      writeMessage(w, f.message!, plainObject(v));
      w.ldelim();
      return;
    case 'struct':
      w.fork();
      writeStruct(w, plainObject(v));
      w.ldelim();
      return;
    case 'value':
      w.fork();
      writeValue(w, v);
      w.ldelim();
      return;
    case 'list':
      if (!Array.isArray(v)) {
        throw NOT_PLAIN;
      }
      w.fork();
      writeList(w, v);
      w.ldelim();
      return;
  }
}

/** Struct { map<string, Value> fields = 1 }: one entry record per key, in the object's key order. */
function writeStruct(w: Writer, object: object): void {
  const record = object as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    w.uint32(10).fork().uint32(10).string(key).uint32(18).fork();
    writeValue(w, record[key]);
    w.ldelim().ldelim();
  }
}

/** The body of a Value: the one field json-wrappers.ts's valueToField picks for this JSON value. */
function writeValue(w: Writer, v: unknown): void {
  if (v === null || v === undefined) {
    w.uint32(8).int32(0); // null_value = NULL_VALUE
  } else if (typeof v === 'number') {
    w.uint32(17).double(v);
  } else if (typeof v === 'string') {
    w.uint32(26).string(v);
  } else if (typeof v === 'boolean') {
    w.uint32(32).bool(v);
  } else if (Array.isArray(v)) {
    if ('$type' in v) {
      throw NOT_PLAIN;
    }
    w.uint32(50).fork();
    writeList(w, v);
    w.ldelim();
  } else {
    w.uint32(42).fork();
    writeStruct(w, plainObject(v));
    w.ldelim();
  }
}

function writeList(w: Writer, values: unknown[]): void {
  for (let i = 0; i < values.length; i++) {
    if (!(i in values)) {
      throw NOT_PLAIN;
    }
    w.uint32(10).fork();
    writeValue(w, values[i]);
    w.ldelim();
  }
}

/** The direct encoder of one message type: the bytes of a plain value, or NOT_PLAIN thrown. */
export type PlainEncoder = (value: object) => Buffer;

/** The direct encoder of `type` (every message type under it planned once, here). */
export function plainEncoder(type: Type): PlainEncoder {
  const plan = planOf(type, new Map());
  return (value) => {
    const w = Writer.create();
    writeMessage(w, plan, plainObject(value));
    return w.finish() as Buffer;
  };
}

/**
 * A message type of the host's .proto files, loaded as proto-loader loads them (LOADER_OPTIONS:
 * snake_case names, imports from protoRoot()).
 */
export function protoType(file: string, name: string): Type {
  const root = new Root();
  const original = root.resolvePath.bind(root);
  root.resolvePath = (origin, target) => {
    if (path.isAbsolute(target)) {
      return target;
    }
    const full = path.join(protoRoot(), target);
    return fs.existsSync(full) ? full : original(origin, target);
  };
  root.loadSync(path.join(protoRoot(), file), { keepCase: true });
  root.resolveAll();
  return root.lookupType(name);
}
