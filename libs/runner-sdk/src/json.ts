/*
 * Plain JSON <-> google.protobuf.Struct / Value as @grpc/proto-loader represents them.
 *
 * Runner Protocol v1 carries its open maps (manifests, result data and usage, the run's config,
 * model messages, ...) as Struct. proto-loader decodes a Struct as `{fields: {k: {kind, *Value}}}`
 * (protobufjs names these well-known fields in camelCase whatever `keepCase` says). The SDK
 * converts at its edge so that runner code only ever sees plain JSON, and it changes nothing
 * global in protobufjs (an author's process may use protobufjs for other things).
 */

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

/** google.protobuf.Value on the wire: one `*Value` field is set (`kind` names it when decoded). */
export interface WireValue {
  kind?: string;
  nullValue?: 'NULL_VALUE' | 0;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: WireStruct | null;
  listValue?: { values?: WireValue[] | null } | null;
}
export interface WireStruct {
  fields?: Record<string, WireValue> | null;
}

/** Encodes one JSON value; `undefined` becomes null. Throws on what JSON cannot hold. */
export function toValue(json: unknown): WireValue {
  if (json === null || json === undefined) {
    return { nullValue: 'NULL_VALUE' };
  }
  if (typeof json === 'number') {
    if (!Number.isFinite(json)) {
      throw new TypeError(`${json} is not a JSON number`);
    }
    return { numberValue: json };
  }
  if (typeof json === 'string') {
    return { stringValue: json };
  }
  if (typeof json === 'boolean') {
    return { boolValue: json };
  }
  if (Array.isArray(json)) {
    return { listValue: { values: json.map(toValue) } };
  }
  if (json instanceof Date) {
    return { stringValue: json.toISOString() };
  }
  if (typeof json === 'object') {
    return { structValue: toStruct(json) };
  }
  throw new TypeError(`a ${typeof json} is not JSON`);
}

/**
 * Sets `key` as an own property, also when it is `__proto__` (a plain assignment would set the
 * object's prototype and drop the key: JSON keeps it, so the wire must too). Every other key is
 * a plain assignment: defineProperty on every key made each result's conversion about three
 * times slower (docs/runner-sdk.md#performance).
 */
function setOwn<T>(target: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/** Encodes a JSON object; keys whose value is `undefined` are left out (as JSON.stringify does). */
export function toStruct(object: object | null | undefined): WireStruct {
  const fields: Record<string, WireValue> = {};
  if (object) {
    for (const key of Object.keys(object)) {
      const value: unknown = Reflect.get(object, key);
      if (value !== undefined) {
        setOwn(fields, key, toValue(value));
      }
    }
  }
  return { fields };
}

/** Decodes one Value; an unset Value decodes as null. */
export function fromValue(value: WireValue | null | undefined): Json {
  if (!value) {
    return null;
  }
  const kind = value.kind ?? Object.keys(value).find((key) => key.endsWith('Value'));
  if (kind === 'numberValue') {
    return value.numberValue ?? 0;
  }
  if (kind === 'stringValue') {
    return value.stringValue ?? '';
  }
  if (kind === 'boolValue') {
    return value.boolValue ?? false;
  }
  if (kind === 'structValue') {
    return fromStruct(value.structValue);
  }
  if (kind === 'listValue') {
    return (value.listValue?.values ?? []).map(fromValue);
  }
  return null; // nullValue, or nothing set
}

/** Decodes a Struct; an unset Struct decodes as `{}`. */
export function fromStruct(struct: WireStruct | null | undefined): JsonObject {
  const out: JsonObject = {};
  const fields = struct?.fields;
  if (fields) {
    for (const key of Object.keys(fields)) {
      setOwn(out, key, fromValue(fields[key]));
    }
  }
  return out;
}

/** Like fromStruct, but an unset Struct stays null (the protocol's "not set"). */
export function fromStructOrNull(struct: WireStruct | null | undefined): JsonObject | null {
  return struct ? fromStruct(struct) : null;
}
