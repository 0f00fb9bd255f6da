import type { BodySchema } from './compiled-body';

/**
 * Small builders of body schemas, one place for the conventions of the HTTP edge
 * (docs/architecture.md#validation): an optional field may be `null` (read as absent), an open map
 * is an object of bounded serialised size, a nested object is an OpenAPI component by name.
 */

const names = new WeakMap<BodySchema, { name: string; description?: string }>();

/** A nested object schema that the OpenAPI document shows as `#/components/schemas/<name>`. */
export function component(name: string, schema: BodySchema): BodySchema {
  names.set(schema, { name });
  return schema;
}

/** The field may be absent or null (both read as absent). */
export function optional(schema: BodySchema, description?: string): BodySchema {
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
export function required(schema: BodySchema, description?: string): BodySchema {
  const named = names.get(schema);
  if (!named) {
    return description === undefined ? schema : { ...schema, description };
  }
  const s = { ...schema };
  names.set(s, { name: named.name, description });
  return s;
}

/** An object with exactly these properties (unknown ones are refused, naming them). */
export function object(
  properties: Record<string, BodySchema>,
  requiredKeys: readonly string[] = [],
  description?: string,
): BodySchema {
  return {
    type: 'object',
    properties,
    ...(requiredKeys.length > 0 ? { required: requiredKeys } : {}),
    additionalProperties: false,
    ...(description !== undefined ? { description } : {}),
  };
}

/** An open JSON object of at most `maxBytes` of JSON (depth and characters: libs/protocol json-limits). */
export function openMap(maxBytes: number, description?: string): BodySchema {
  return {
    type: 'object',
    'x-max-json-bytes': maxBytes,
    description: description ?? `Open JSON object: at most ${maxBytes} bytes; the whole body at most 32 levels deep`,
  };
}

/** A string of at most `max` characters (`nonEmpty`: and at least one). */
export function text(max?: number, nonEmpty = false, extra: Partial<BodySchema> = {}): BodySchema {
  return {
    ...(max !== undefined ? { maxLength: max } : {}),
    ...(nonEmpty ? { minLength: 1 } : {}),
    type: 'string',
    ...extra,
  };
}

/** A string matching `pattern`; `rule` is the sentence a break answers ("must be …"). */
export function matching(pattern: RegExp, rule: string, extra: Partial<BodySchema> = {}): BodySchema {
  return { pattern: pattern.source, 'x-rule': rule, type: 'string', ...extra };
}

/** An integer from `min` to `max`. */
export function integer(min: number, max: number, extra: Partial<BodySchema> = {}): BodySchema {
  return { maximum: max, minimum: min, type: 'integer', ...extra };
}

/** One of `values`. */
export function oneOf(values: readonly string[], extra: Partial<BodySchema> = {}): BodySchema {
  return { type: 'string', enum: values, ...extra };
}

/** A list of at most `max` items. */
export function list(items: BodySchema, max: number, extra: Partial<BodySchema> = {}): BodySchema {
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
