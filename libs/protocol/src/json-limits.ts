/**
 * Limits every JSON value entering the host must respect, checked by one iterative walk (no
 * recursion, so a 20,000-level document cannot overflow the stack) before any other validation.
 *
 * - Depth: a run context travels as protobuf, where every JSON level of an open map costs two
 *   message levels (Struct → Value); decoders stop at 100. 32 JSON levels for a whole request
 *   body keep `event.data`, `metadata`, `runner_config`, policies … carriable.
 * - Strings (values and keys): no NUL (PostgreSQL text cannot hold U+0000) and no lone UTF-16
 *   surrogates (they cannot be encoded as UTF-8 for the database or protobuf: they would be
 *   silently replaced, so ids would no longer match).
 * - Numbers: finite (JSON.parse turns 1e400 into Infinity).
 */
export const MAX_JSON_DEPTH = 32;

export interface JsonProblem {
  field: string;
  rule: string;
}

// A lone high surrogate (not followed by a low one) or a lone low surrogate (not preceded by a high one).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const SIMPLE_KEY = /^[A-Za-z0-9_$-]+$/;
const MAX_FIELD_CHARS = 200;

/** Why a string cannot be stored, or null. */
export function stringProblem(s: string): string | null {
  if (s.includes('\u0000')) {
    return 'must not contain NUL characters';
  }
  if (LONE_SURROGATE.test(s)) {
    return 'must not contain lone UTF-16 surrogates (not valid Unicode)';
  }
  return null;
}

/** `a.b[0]["odd key"]`; long paths are cut (a 20,000-level path is no use in an error). */
export function joinPath(parent: string, key: string | number): string {
  if (parent.length > MAX_FIELD_CHARS) {
    return parent;
  }
  let next: string;
  if (typeof key === 'number') {
    next = `${parent}[${key}]`;
  } else if (SIMPLE_KEY.test(key)) {
    next = parent ? `${parent}.${key}` : key;
  } else {
    next = `${parent}[${JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}…` : key)}]`;
  }
  return next.length > MAX_FIELD_CHARS ? `${next.slice(0, MAX_FIELD_CHARS)}…` : next;
}

/**
 * The first problem of a parsed JSON value, or null. `root` names the value itself (`''` for a
 * request body, whose top-level keys are then the field names).
 */
export function checkJson(value: unknown, root = '', maxDepth = MAX_JSON_DEPTH): JsonProblem | null {
  const stack: { v: unknown; path: string; depth: number }[] = [{ v: value, path: root, depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop()!;
    const field = path || 'body';
    if (typeof v === 'string') {
      const rule = stringProblem(v);
      if (rule) {
        return { field, rule };
      }
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) {
        return { field, rule: 'must be a finite number' };
      }
    } else if (typeof v === 'object' && v !== null) {
      if (depth >= maxDepth) {
        return { field, rule: `JSON nested deeper than ${maxDepth} levels (the limit)` };
      }
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--) {
          stack.push({ v: v[i], path: joinPath(path, i), depth: depth + 1 });
        }
      } else {
        const keys = Object.keys(v);
        for (let i = keys.length - 1; i >= 0; i--) {
          const key = keys[i];
          const keyRule = stringProblem(key);
          const childPath = joinPath(path, key);
          if (keyRule) {
            return { field: childPath, rule: `key ${keyRule}` };
          }
          stack.push({ v: (v as Record<string, unknown>)[key], path: childPath, depth: depth + 1 });
        }
      }
    }
  }
  return null;
}

/** UTF-8 size of a value's JSON, or Infinity when it cannot be serialised. */
export function jsonBytes(value: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
  } catch {
    return Infinity;
  }
}

/**
 * How many values a JSON text may hold, counted as its objects and arrays plus its commas (each
 * comma adds one member or element to its container). Parsing is synchronous and its cost grows with the values, not the bytes: 4.8 MB of
 * nested or empty arrays — under the 5 MiB body limit — took JSON.parse over a second of event
 * loop, before any key was checked, and every later step (the JSON check, the DTO rules, a run
 * context's protobuf Struct) costs per value too. 50,000 is far above what an event, an agent or a
 * knowledge document carries — an open map is at most 256 KiB of JSON, and JSON of ids, text and
 * settings averages well over 5 bytes a value — and leaves room for a 20,000-level document to be
 * refused by the depth rule, naming its field (docs/api.md#limits).
 */
export const MAX_JSON_VALUES = 50_000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;

/**
 * Why a JSON text must not be parsed, or null: its `{`, `[` and `,` outside strings counted on
 * the raw text in one pass, before JSON.parse allocates anything (each is a container or one more
 * member or element, so the count is below the values JSON.parse builds). An invalid text is
 * lexed the same way up to its first error, which is as far as JSON.parse gets. The walk stops at
 * the first value over the limit.
 */
export function jsonTextProblem(text: string, maxValues = MAX_JSON_VALUES): string | null {
  let values = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET || c === COMMA) {
      if (++values > maxValues) {
        return `JSON holds more than ${maxValues} values (objects, arrays and comma-separated members; the limit)`;
      }
    }
  }
  return null;
}

/** The index of the quote closing the string opened at `open` (the text's length if none). */
function stringEnd(text: string, open: number): number {
  for (let at = text.indexOf('"', open + 1); at !== -1; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) {
      backslashes++;
    }
    if (backslashes % 2 === 0) {
      return at;
    }
  }
  return text.length;
}
