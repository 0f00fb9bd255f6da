import { Root, common, wrappers, type Message, type IConversionOptions, type Type } from 'protobufjs';

/*
 * Runner Protocol v1 open maps travel as google.protobuf.Struct. These protobufjs wrappers make
 * proto-loader (and so the Nest gRPC server) hand them to the code as plain JSON and accept plain
 * JSON when encoding, for Struct, Value and ListValue. (protobufjs defines these well-known types
 * itself, with camelCase field names whatever keepCase says.) ts-proto registers a Struct wrapper
 * of its own that breaks on map values, so this module must load after the generated code
 * (see index.ts).
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type WrapperThis = Type & { fromObject(o: object): Message; toObject(m: Message, o?: IConversionOptions): object };

/** Well-known types per protobufjs root, looked up once (these conversions run for every value). */
const typeCache = new WeakMap<object, Map<string, Type>>();
function typeOf(self: WrapperThis, name: string): Type {
  let byName = typeCache.get(self.root);
  if (!byName) {
    byName = new Map();
    typeCache.set(self.root, byName);
  }
  let type = byName.get(name);
  if (!type) {
    type = self.lookupType(name);
    byName.set(name, type);
  }
  return type;
}

/**
 * Sets `key` as an own enumerable property, `__proto__` included: a plain assignment of
 * `__proto__` sets the object's prototype instead, which would drop the key from the JSON.
 */
function setOwn<T>(target: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/** A field of a decoded message, read without trusting its declared type. */
function fieldOf(message: Message, name: string): unknown {
  return Reflect.get(message, name);
}

function isMessage(value: unknown): value is Message {
  return typeof value === 'object' && value !== null && '$type' in value;
}

function valueToField(value: unknown): Record<string, unknown> {
  if (value === null || value === undefined) {
    return { nullValue: 'NULL_VALUE' };
  }
  if (typeof value === 'number') {
    return { numberValue: value };
  }
  if (typeof value === 'string') {
    return { stringValue: value };
  }
  if (typeof value === 'boolean') {
    return { boolValue: value };
  }
  if (Array.isArray(value)) {
    return { listValue: value };
  }
  if (typeof value === 'object') {
    return { structValue: value };
  }
  throw new TypeError(`a ${typeof value} cannot be encoded as google.protobuf.Value`);
}

const structWrapper = {
  fromObject(this: WrapperThis, object: unknown): Message {
    if (isMessage(object)) {
      return object;
    }
    const valueType = typeOf(this, '.google.protobuf.Value');
    const fields: Record<string, Message> = {};
    for (const [key, value] of Object.entries((object ?? {}) as Record<string, unknown>)) {
      setOwn(fields, key, valueType.fromObject(value as object));
    }
    return this.create({ fields });
  },
  toObject(this: WrapperThis, message: Message, options?: IConversionOptions): Record<string, Json> {
    const fields = fieldOf(message, 'fields');
    const valueType = typeOf(this, '.google.protobuf.Value');
    const out: Record<string, Json> = {};
    if (typeof fields === 'object' && fields !== null) {
      for (const [key, value] of Object.entries(fields as Record<string, Message>)) {
        setOwn(out, key, valueType.toObject(value, options) as Json);
      }
    }
    return out;
  },
};

const valueWrapper = {
  fromObject(this: WrapperThis, object: unknown): Message {
    return isMessage(object) ? object : this.fromObject(valueToField(object));
  },
  toObject(this: WrapperThis, message: Message, options?: IConversionOptions): Json {
    const struct = fieldOf(message, 'structValue');
    if (struct) {
      return typeOf(this, '.google.protobuf.Struct').toObject(struct as Message, options);
    }
    const list = fieldOf(message, 'listValue');
    if (list) {
      return typeOf(this, '.google.protobuf.ListValue').toObject(list as Message, options);
    }
    for (const key of ['stringValue', 'numberValue', 'boolValue'] as const) {
      const v = fieldOf(message, key);
      if (v !== undefined && v !== null && Object.prototype.hasOwnProperty.call(message, key)) {
        return v as Json;
      }
    }
    return null;
  },
};

const listWrapper = {
  fromObject(this: WrapperThis, object: unknown): Message {
    if (isMessage(object)) {
      return object;
    }
    const valueType = typeOf(this, '.google.protobuf.Value');
    const values = (Array.isArray(object) ? object : []).map((v: unknown) => valueType.fromObject(v as object));
    return this.create({ values });
  },
  toObject(this: WrapperThis, message: Message, options?: IConversionOptions): Json[] {
    const list = fieldOf(message, 'values');
    const values: unknown[] = Array.isArray(list) ? (list as unknown[]) : [];
    const valueType = typeOf(this, '.google.protobuf.Value');
    return values.map((v) => valueType.toObject(v as Message, options) as Json);
  },
};

const WELL_KNOWN = Root.fromJSON(common.get('google/protobuf/struct.proto')!);
const VALUE = WELL_KNOWN.lookupType('google.protobuf.Value');
const STRUCT = WELL_KNOWN.lookupType('google.protobuf.Struct');
const LIST = WELL_KNOWN.lookupType('google.protobuf.ListValue');

/**
 * A JSON value as a tree of Value / Struct / ListValue messages. The wrappers above pass a message
 * through as it is, so an encoder handed this tree skips their per-field conversion of plain JSON
 * (the host API's StateGet answer: docs/benchmarks.md#host-api); the bytes are the same. A null is
 * NULL_VALUE; anything that is not JSON throws.
 */
export function jsonValueMessage(value: unknown): Message {
  if (typeof value === 'string') {
    return VALUE.create({ stringValue: value });
  }
  if (typeof value === 'number') {
    return VALUE.create({ numberValue: value });
  }
  if (typeof value === 'boolean') {
    return VALUE.create({ boolValue: value });
  }
  if (value === null) {
    return VALUE.create({ nullValue: 0 }); // NULL_VALUE
  }
  if (Array.isArray(value)) {
    return VALUE.create({ listValue: LIST.create({ values: value.map(jsonValueMessage) }) });
  }
  if (typeof value === 'object') {
    const fields: Record<string, Message> = {};
    for (const key of Object.keys(value)) {
      setOwn(fields, key, jsonValueMessage((value as Record<string, unknown>)[key]));
    }
    return VALUE.create({ structValue: STRUCT.create({ fields }) });
  }
  throw new TypeError(`a ${typeof value} cannot be encoded as google.protobuf.Value`);
}

// protobufjs types its wrapper table by the wrapper's own generic shape; these are registered by name.
Reflect.set(wrappers, '.google.protobuf.Struct', structWrapper);
Reflect.set(wrappers, '.google.protobuf.Value', valueWrapper);
Reflect.set(wrappers, '.google.protobuf.ListValue', listWrapper);
