import { type PipeTransform } from '@nestjs/common';
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import { joinPath, jsonBytes, type BodySchema, type Schema } from '@libs/protocol';
import { invalid, MAX_LISTED_PROBLEMS, type Problem } from '../filters/validation';

const ajv = new Ajv({
  allErrors: true,
  // The patterns are JavaScript patterns as the rest of the host reads them (no `u` flag).
  unicodeRegExp: false,
  strictTypes: false,
  keywords: [
    { keyword: 'example' },
    { keyword: 'x-rule', schemaType: 'string' },
    {
      keyword: 'x-max-json-bytes',
      type: 'object',
      schemaType: 'number',
      errors: true,
      validate: (max: number, data: unknown) => jsonBytes(data) <= max,
    },
  ],
});

/** A body validator compiled once (at boot); it answers the body or throws the field-named 400. */
export class CompiledBody<T> {
  private readonly check: ValidateFunction;

  constructor(private readonly schema: Schema<T>) {
    this.check = ajv.compile(schema);
  }

  /**
   * The body, typed, when it keeps the schema (its null optional fields removed: null reads as
   * absent); else the `invalid_argument` naming the fields at fault (the first
   * `MAX_LISTED_PROBLEMS` in schema order, and how many more: docs/api.md#validation).
   */
  parse(value: unknown): T {
    if (this.check(value)) {
      dropNulls(this.schema, value);
      return value as T;
    }
    const { problems, total } = explain(this.schema, value, this.check.errors ?? []);
    throw invalid(problems, total);
  }
}

/** `@Body(new BodyPipe(compiled))`: the route's body through its compiled validator. */
export class BodyPipe<T> implements PipeTransform<unknown, T> {
  constructor(private readonly body: CompiledBody<T>) {}

  transform(value: unknown): T {
    return this.body.parse(value);
  }
}

interface Located {
  /** The field path in the checker's syntax (a.b[0].c). */
  field: string;
  /** Sort key: per level the index of the property in its schema (unknown properties -1), or the array index. */
  order: number[];
  schema: BodySchema;
  required: boolean;
  value: unknown;
  /** The name of the property (for array items: of the array). */
  name: string;
  inArray: boolean;
}

/** Walks the schema and the value along an ajv instance path ("/event/raw_ref", "/input/contents/0"). */
function locate(root: BodySchema, body: unknown, pointer: string): Located {
  const segments =
    pointer === ''
      ? []
      : pointer
          .slice(1)
          .split('/')
          .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let at: Located = { field: '', order: [], schema: root, required: true, value: body, name: 'body', inArray: false };
  for (const seg of segments) {
    const parent = at;
    if (parent.schema.type === 'array') {
      const i = Number(seg);
      at = {
        field: joinPath(parent.field, i),
        order: [...parent.order, i],
        schema: parent.schema.items ?? {},
        required: true,
        value: Array.isArray(parent.value) ? parent.value[i] : undefined,
        name: parent.name,
        inArray: true,
      };
    } else {
      const keys = Object.keys(parent.schema.properties ?? {});
      at = {
        field: joinPath(parent.field, /^\d+$/.test(seg) ? Number(seg) : seg),
        order: [...parent.order, keys.indexOf(seg)],
        schema: parent.schema.properties?.[seg] ?? {},
        required: parent.schema.required?.includes(seg) ?? false,
        value: isObject(parent.value) ? parent.value[seg] : undefined,
        name: seg,
        inArray: false,
      };
    }
  }
  return at;
}

/**
 * Removes the `null` of every optional field the schema declares (not inside open maps, whose
 * nulls are data), so the admitted body is the type its schema infers: absent, never null
 * (docs/architecture.md#validation). O(declared fields present), on a body already validated.
 */
function dropNulls(s: BodySchema, v: unknown): void {
  if (s.properties !== undefined && isObject(v)) {
    for (const k of Object.keys(v)) {
      const x = v[k];
      const ps = s.properties[k];
      if (x === null) {
        if (ps?.nullable) {
          delete v[k];
        }
      } else if (ps !== undefined && typeof x === 'object') {
        dropNulls(ps, x);
      }
    }
  } else if (s.items !== undefined && Array.isArray(v)) {
    for (const x of v) {
      if (typeof x === 'object' && x !== null) {
        dropNulls(s.items, x);
      }
    }
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const TYPE_RULE: Record<string, string> = {
  string: 'must be a string',
  integer: 'must be an integer number',
  number: 'must be a number',
  boolean: 'must be a boolean value',
  array: 'must be an array',
};

/** The sentence of one keyword of a field's schema, as the host's 400s word it (docs/api.md#validation). */
function ruleOf(keyword: string, s: BodySchema, name: string): string | null {
  switch (keyword) {
    case 'maxLength':
      return `${name} must be shorter than or equal to ${s.maxLength} characters`;
    case 'minLength':
      return `${name} should not be empty`;
    case 'pattern':
      return `${name} ${s['x-rule'] ?? `must match ${s.pattern}`}`;
    case 'enum':
      return `${name} must be one of the following values: ${(s.enum ?? [])
        .filter((v) => v !== null)
        .map(String)
        .join(', ')}`;
    case 'minimum':
      return `${name} must not be less than ${s.minimum}`;
    case 'maximum':
      return `${name} must not be greater than ${s.maximum}`;
    case 'maxItems':
      return `${name} must contain no more than ${s.maxItems} elements`;
    case 'x-max-json-bytes':
      return `must be at most ${s['x-max-json-bytes']} bytes of JSON`;
    case 'type':
      // An enum names its values; its type is not a rule of its own.
      return s.enum || !s.type || !TYPE_RULE[s.type] ? null : `${name} ${TYPE_RULE[s.type]}`;
    default:
      return null;
  }
}

/**
 * Every rule a missing or wrongly typed value breaks: all of its field's rules, in schema order
 * (a missing value breaks even `minLength`; a present one of the wrong type does not, and a
 * number that is not an integer breaks its bounds only when outside them).
 */
function wrongValue(at: Located): string[] {
  const s = at.schema;
  const missing = at.value === undefined || at.value === null;
  if (s.type === 'object') {
    if (s['x-max-json-bytes'] !== undefined) {
      return ['must be a JSON object'];
    }
    const nested = `${at.inArray ? 'each value in ' : ''}nested property ${at.name} must be either object or array`;
    if (at.inArray || !at.required) {
      return [nested];
    }
    return [
      ...(missing ? [`${at.name} should not be null or undefined`] : []),
      `${at.name} must be an object`,
      ...(at.value !== undefined && !Array.isArray(at.value) ? [nested] : []),
    ];
  }
  const n = typeof at.value === 'number' ? at.value : null;
  const rules = Object.keys(s).flatMap((k) => {
    // A present value breaks `minLength` only when empty; a number its bounds only when outside them.
    if (
      (k === 'minLength' && !missing) ||
      (k === 'minimum' && n !== null && n >= (s.minimum ?? n)) ||
      (k === 'maximum' && n !== null && n <= (s.maximum ?? n))
    ) {
      return [];
    }
    const rule = ruleOf(k, s, at.name);
    return rule ? [rule] : [];
  });
  if (s.type === 'array' && s.items?.type === 'object') {
    rules.push(`each value in nested property ${at.name} must be either object or array`);
  }
  return rules;
}

/** A problem found, with its place in the answer; `problem` is built only for the problems listed. */
interface Found {
  order: number[];
  rank: number;
  seq: number;
  problem: () => Problem;
}

/**
 * ajv's errors as field-named problems, in the order of the schema (unknown properties first at
 * each level): the first `MAX_LISTED_PROBLEMS` of them, and how many there were. A body may hold
 * one error per value (50,000 unknown keys): per error this costs one lookup of its place, cached
 * per instance path, and one comparison with the last listed; the sentences and the sort are paid
 * only for the problems listed (docs/api.md#validation).
 */
function explain(root: BodySchema, body: unknown, errors: ErrorObject[]): { problems: Problem[]; total: number } {
  const located = new Map<string, Located>();
  const at = (pointer: string): Located => {
    let l = located.get(pointer);
    if (l === undefined) {
      l = locate(root, body, pointer);
      located.set(pointer, l);
    }
    return l;
  };
  const first = new FirstN<Found>(
    MAX_LISTED_PROBLEMS,
    (a, b) => compareOrder(a.order, b.order) || a.rank - b.rank || a.seq - b.seq,
  );
  let seq = 0;
  // Several breaks of one field are listed in the order of its schema's keywords (rank).
  const add = (order: number[], problem: () => Problem, rank = 0) => first.offer({ order, rank, seq: seq++, problem });
  const addRules = (l: Located, rules: string[], field = l.field, rank = 0) => {
    for (const rule of rules) {
      add(l.order, () => ({ field, rule }), rank);
    }
  };
  const wrong = new Set<string>();
  // Missing and wrongly typed values first: they stand for every rule of their field.
  for (const e of errors) {
    if (e.keyword === 'required' || e.keyword === 'type') {
      const pointer =
        e.keyword === 'required'
          ? `${e.instancePath}/${String((e.params as { missingProperty: string }).missingProperty)}`
          : e.instancePath;
      if (wrong.has(pointer)) {
        continue;
      }
      wrong.add(pointer);
      const l = locate(root, body, pointer);
      addRules(l, l.field === '' ? ['body must be a JSON object'] : wrongValue(l), l.field || 'body');
    }
  }
  const eachValue = new Set<string>();
  for (const e of errors) {
    if (e.keyword === 'required' || e.keyword === 'type' || wrong.has(e.instancePath)) {
      continue;
    }
    if (e.keyword === 'additionalProperties') {
      const key = String((e.params as { additionalProperty: string }).additionalProperty);
      const parent = at(e.instancePath);
      add([...parent.order, -1], () => ({
        field: joinPath(parent.field, /^\d+$/.test(key) ? Number(key) : key),
        rule: `property ${key} should not exist`,
      }));
      continue;
    }
    const l = at(e.instancePath);
    if (l.inArray && l.schema.type !== 'object') {
      // A list of values: one problem for the list, as "each value in <list> …".
      const list = at(e.instancePath.slice(0, e.instancePath.lastIndexOf('/')));
      const rule = ruleOf(e.keyword, l.schema, list.name);
      const key = `${list.field}\u0000${e.keyword}`;
      if (rule && !eachValue.has(key)) {
        eachValue.add(key);
        addRules(list, [`each value in ${rule}`]);
      }
      continue;
    }
    const rule = ruleOf(e.keyword, l.schema, l.name) ?? `${l.name} ${e.message ?? 'is invalid'}`;
    addRules(l, [rule], l.field, Object.keys(l.schema).indexOf(e.keyword));
  }
  return { problems: first.items().map((f) => f.problem()), total: seq };
}

/**
 * The `n` smallest of the items offered, in order, without sorting them all: each offer costs one
 * comparison with the largest kept, plus a bounded insertion when it is smaller.
 */
export class FirstN<T> {
  private readonly kept: T[] = [];

  constructor(
    private readonly n: number,
    private readonly compare: (a: T, b: T) => number,
  ) {}

  offer(item: T): void {
    const kept = this.kept;
    if (kept.length === this.n) {
      if (this.n === 0 || this.compare(item, kept[kept.length - 1]) >= 0) {
        return;
      }
      kept.pop();
    }
    let lo = 0;
    let hi = kept.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.compare(kept[mid], item) <= 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    kept.splice(lo, 0, item);
  }

  items(): T[] {
    return this.kept;
  }
}

function compareOrder(a: number[], b: number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) {
      return a[i] - b[i];
    }
  }
  return a.length - b.length;
}
