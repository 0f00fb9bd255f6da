/*
 * google.protobuf.Struct <-> plain JSON.
 *
 * Runner Protocol v1 carries its open JSON maps (manifests, result `data` and `usage`, the run's
 * `config`, ...) as google.protobuf.Struct. With plain @grpc/proto-loader a Struct is a message
 * like `{fields: {mode: {kind: 'stringValue', stringValue: 'echo'}}}`; protobufjs defines these
 * well-known types itself, so their field names are camelCase even with `keepCase: true`.
 * These two converters are all a plugin needs to work with plain JSON instead.
 */

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

/** google.protobuf.Value: exactly one of the `*Value` fields is set (`kind` names it when decoded). */
export interface Value {
  kind?: string;
  nullValue?: 'NULL_VALUE' | 0;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: Struct | null;
  listValue?: ListValue | null;
}
export interface Struct {
  fields?: Record<string, Value> | null;
}
export interface ListValue {
  values?: Value[] | null;
}

/** Encodes one JSON value. `undefined` (not JSON) is encoded as null. */
export function toValue(json: Json | undefined): Value {
  if (json === null || json === undefined) {
    return { nullValue: 'NULL_VALUE' };
  }
  if (typeof json === 'number') {
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
  return { structValue: toStruct(json) };
}

/** Encodes a JSON object. Keys whose value is `undefined` are left out, as JSON.stringify does. */
export function toStruct(object: Record<string, Json | undefined>): Struct {
  const fields: Record<string, Value> = {};
  for (const [key, value] of Object.entries(object)) {
    if (value !== undefined) {
      fields[key] = toValue(value);
    }
  }
  return { fields };
}

/** Decodes one Value. An unset Value (no kind) decodes as null. */
export function fromValue(value: Value | null | undefined): Json {
  if (!value) {
    return null;
  }
  // Decoded messages name the set field in `kind` (loader option `oneofs: true`); hand-built ones may not.
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

/** Decodes a Struct. An unset Struct (null in the decoded message) decodes as `{}`. */
export function fromStruct(struct: Struct | null | undefined): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(struct?.fields ?? {})) {
    out[key] = fromValue(value);
  }
  return out;
}
