/**
 * Typed builders of request-body JSON schemas, one place for the conventions of the HTTP edge
 * (docs/architecture.md#validation): an optional field may be `null` (read as absent: the compiled
 * validator drops it), an open map is an object of bounded serialised size, a nested object is an
 * OpenAPI component by name. Each builder returns a plain JSON schema that also carries, at the type
 * level only, the type of the value it admits, so a body's type is inferred from its schema
 * (`Infer<typeof schema>`) and never written beside it. The schema lives with the domain that owns
 * the shape; the HTTP edge compiles it (apps/host/src/http/compiled-body.ts).
 */

/** The largest value of an INTEGER column (SQLite and PostgreSQL `integer`: 32-bit on PostgreSQL). */
export const INT32_MAX = 2_147_483_647;
/** 9999-12-31T23:59:59Z: epoch seconds any BIGINT column, Date and int64 can hold. */
export const MAX_EPOCH_SECONDS = 253_402_300_799;
/** Serialised size of one open map (`event.data`, `metadata`, `runner_config`, a policy …). */
export const OPEN_MAP_MAX_BYTES = 256 * 1024;

/**
 * A JSON schema of a request body, in the subset both ajv and OpenAPI 3.0 read: `nullable` marks
 * an optional field that may also be `null` (absent, as before), and two extensions carry what a
 * field-named 400 needs — `x-max-json-bytes` (an open map's serialised size) and `x-rule` (the
 * sentence a `pattern` break answers).
 */
export interface BodySchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  nullable?: boolean;
  properties?: Record<string, BodySchema>;
  required?: readonly string[];
  additionalProperties?: boolean;
  items?: BodySchema;
  enum?: readonly unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  description?: string;
  example?: unknown;
  default?: unknown;
  'x-max-json-bytes'?: number;
  'x-rule'?: string;
}

/** Keywords a builder's caller may add (documentation, defaults). */
export type SchemaExtra = Pick<BodySchema, 'description' | 'example' | 'default'>;

declare const admits: unique symbol;

/** A body schema that admits values of type `T` (the type exists only for the compiler). */
export type Schema<T> = BodySchema & { readonly [admits]?: { value: T } };

/** The type of the values a schema admits. */
export type Infer<S extends Schema<unknown>> = NonNullable<S[typeof admits]>['value'];

type Simplify<T> = { [K in keyof T]: T[K] } & {};
type ObjectOf<P extends Record<string, Schema<unknown>>, R extends keyof P> = Simplify<
  { [K in R]: Infer<P[K]> } & { [K in Exclude<keyof P, R>]?: Infer<P[K]> }
>;

const names = new WeakMap<BodySchema, { name: string; description?: string }>();

/** A nested object schema that the OpenAPI document shows as `#/components/schemas/<name>`. */
export function component<T>(name: string, schema: Schema<T>): Schema<T> {
  names.set(schema, { name });
  return schema;
}

/** The field may be absent or null (both read as absent). */
export function optional<T>(schema: Schema<T>, description?: string): Schema<T> {
  const s: BodySchema = { ...schema, nullable: true };
  if (s.enum) {
    s.enum = [...s.enum, null];
  }
  const named = names.get(schema);
  if (named) {
    names.set(s, { name: named.name, description });
  } else if (description !== undefined) {
    s.description = description;
  }
  return s;
}

/** A required nested object, documented by its component name. */
export function required<T>(schema: Schema<T>, description?: string): Schema<T> {
  const named = names.get(schema);
  if (!named) {
    return description === undefined ? schema : { ...schema, description };
  }
  const s = { ...schema };
  names.set(s, { name: named.name, description });
  return s;
}

/** The same schema under another component name (one rule shown twice in the document). */
export function alias<T>(name: string, schema: Schema<T>): Schema<T> {
  return component(name, { ...schema });
}

/**
 * An object with exactly these properties (unknown ones are refused, naming them); the keys in
 * `requiredKeys` must be present, the others may be absent.
 */
export function object<P extends Record<string, Schema<unknown>>, R extends keyof P & string = never>(
  properties: P,
  requiredKeys: readonly R[] = [],
  description?: string,
): Schema<ObjectOf<P, R>> {
  return {
    type: 'object',
    properties,
    ...(requiredKeys.length > 0 ? { required: requiredKeys } : {}),
    additionalProperties: false,
    ...(description !== undefined ? { description } : {}),
  };
}

/** An open JSON object of at most `maxBytes` of JSON (depth and characters: json-limits). */
export function openMap(maxBytes: number, description?: string): Schema<Record<string, unknown>> {
  return {
    type: 'object',
    'x-max-json-bytes': maxBytes,
    description: description ?? `Open JSON object: at most ${maxBytes} bytes; the whole body at most 32 levels deep`,
  };
}

/** A string of at most `max` characters (`nonEmpty`: and at least one). */
export function text(max?: number, nonEmpty = false, extra: SchemaExtra = {}): Schema<string> {
  return {
    ...(max !== undefined ? { maxLength: max } : {}),
    ...(nonEmpty ? { minLength: 1 } : {}),
    type: 'string',
    ...extra,
  };
}

/** A string matching `pattern`; `rule` is the sentence a break answers ("must be …"). */
export function matching(pattern: RegExp, rule: string, extra: SchemaExtra = {}): Schema<string> {
  return { pattern: pattern.source, 'x-rule': rule, type: 'string', ...extra };
}

/** An integer from `min` to `max`. */
export function integer(min: number, max: number, extra: SchemaExtra = {}): Schema<number> {
  return { maximum: max, minimum: min, type: 'integer', ...extra };
}

/** `true` or `false`. */
export function boolean(extra: SchemaExtra = {}): Schema<boolean> {
  return { type: 'boolean', ...extra };
}

/** One of `values`. */
export function oneOf<V extends string>(values: readonly V[], extra: SchemaExtra = {}): Schema<V> {
  return { type: 'string', enum: values, ...extra };
}

/** A list of at most `max` items. */
export function list<T>(items: Schema<T>, max: number, extra: SchemaExtra = {}): Schema<T[]> {
  return { maxItems: max, type: 'array', items, ...extra };
}

type OpenApiSchema = Record<string, unknown>;

/**
 * The OpenAPI components of a body schema: every named nested object becomes its own component
 * and a `$ref` where it is used, so the document describes the body from the same schema the
 * validator is compiled from.
 */
export function openApiComponents(root: BodySchema): Record<string, OpenApiSchema> {
  const out: Record<string, OpenApiSchema> = {};
  const emit = (s: BodySchema, top: boolean): OpenApiSchema => {
    const named = names.get(s);
    if (named && !top) {
      if (!(named.name in out)) {
        out[named.name] = {};
        out[named.name] = emit(s, true);
      }
      const ref = { $ref: `#/components/schemas/${named.name}` };
      return named.description !== undefined ? { allOf: [ref], description: named.description } : ref;
    }
    const o: OpenApiSchema = {};
    for (const [k, v] of Object.entries(s)) {
      if (top && named && k === 'nullable') {
        continue;
      }
      if (k === 'properties') {
        o[k] = Object.fromEntries(
          Object.entries(v as Record<string, BodySchema>).map(([p, ps]) => [p, emit(ps, false)]),
        );
      } else if (k === 'items') {
        o[k] = emit(v as BodySchema, false);
      } else if (k === 'enum' && top && named) {
        o[k] = (v as unknown[]).filter((x) => x !== null);
      } else {
        o[k] = v;
      }
    }
    return o;
  };
  const named = names.get(root);
  if (!named) {
    throw new Error('openApiComponents: the root schema needs a component name');
  }
  out[named.name] = emit(root, true);
  return out;
}
