import * as fc from 'fast-check';

// Generators of hostile input shared by the HTTP and gRPC fuzz suites.

/** Strings that break storage or parsers: NUL, lone surrogates, RTL overrides, huge, empty. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\uD800',
    'x\uDFFFy',
    '\uDC00\uD800',
    '\u202Eevil\u202C',
    'مرحبا',
    '😀',
    '../../etc/passwd',
    "'; DROP TABLE runs; --",
    '%00',
    '1e23',
    '-1',
    '2147483648',
    '99999999999999999999',
    'NaN',
    '__proto__',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.integer({ min: 256, max: 70_000 }).map((n) => 'x'.repeat(n)),
);

/** Numbers at the edges of int32, int64, double and JSON. */
export const extremeNumber: fc.Arbitrary<number> = fc.oneof(
  fc.constantFrom(
    1e308,
    -1e308,
    -0,
    2 ** 53 + 1,
    2 ** 53,
    1e23,
    2 ** 31,
    2 ** 31 - 1,
    -(2 ** 31) - 1,
    2 ** 63,
    2 ** 64,
  ),
  fc.constantFrom(-1, 0, 1, 1.5, Number.MIN_VALUE, 1e-300, 253402300800),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

/** Placeholder for a deep document: replaced in the serialised body (JSON.stringify would recurse). */
export const DEEP = '__fuzz_deep__';
export const deepMarker: fc.Arbitrary<string> = fc
  .constantFrom(5, 31, 32, 33, 49, 100, 3000, 20_000)
  .map((n) => `${DEEP}${n}__`);

/** `levels` nested objects or arrays as JSON text, built without recursion. */
export function deepJsonText(levels: number, arrays = false): string {
  return arrays ? '['.repeat(levels) + ']'.repeat(levels) : '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
}

/** JSON.stringify, then every deep marker string becomes a nested document of that depth. */
export function serialise(value: unknown): string {
  return JSON.stringify(value).replace(new RegExp(`"${DEEP}(\\d+)__"`, 'g'), (_m, n: string) =>
    deepJsonText(Number(n), Number(n) % 2 === 1),
  );
}

const scalar: fc.Arbitrary<unknown> = fc.oneof(nastyString, extremeNumber, fc.boolean(), fc.constant(null));

/** Any JSON value: scalars, nested (bounded) and wide objects, and deep markers. */
export const jsonValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: scalar },
  { weight: 2, arbitrary: fc.dictionary(nastyString, scalar, { maxKeys: 5 }) },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 5 }) },
  { weight: 1, arbitrary: deepMarker },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 100, max: 5000 })
      .map((n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]))),
  },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
);

/** Every path (list of keys) of a JSON template, containers included. */
function pathsOf(v: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = prefix.length > 0 ? [prefix] : [];
  if (typeof v === 'object' && v !== null) {
    for (const [k, child] of Object.entries(v)) {
      out.push(...pathsOf(child, [...prefix, Array.isArray(v) ? Number(k) : k]));
    }
  }
  return out;
}

function setPath(root: unknown, path: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let cur = copy;
  for (const key of path.slice(0, -1)) {
    cur = cur[key] as Record<string | number, unknown>;
  }
  const last = path[path.length - 1];
  if (value === undefined) {
    delete cur[last];
  } else {
    cur[last] = value;
  }
  return copy;
}

/**
 * A valid body with one to three of its fields replaced by hostile values, removed (undefined),
 * or joined by an unknown field: reaches the validation of every field and, when the result is
 * still valid, the service behind it.
 */
export function mutated(template: Record<string, unknown>): fc.Arbitrary<unknown> {
  const paths = pathsOf(template);
  const change = fc.tuple(
    fc.oneof(
      fc.constantFrom(...paths),
      fc.constantFrom(...paths).map((p) => [...p.slice(0, -1), 'unknown_field']),
    ),
    fc.oneof(jsonValue, fc.constant(undefined)),
  );
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant(template) },
    {
      weight: 8,
      arbitrary: fc.array(change, { minLength: 1, maxLength: 3 }).map((changes) => {
        let body: unknown = template;
        for (const [path, value] of changes) {
          try {
            body = setPath(body, path, value);
          } catch {
            // An earlier change replaced a container with a scalar: keep the body as it is.
          }
        }
        return body;
      }),
    },
  );
}

/** Bytes as %XX escapes: lets a test send any byte sequence (invalid UTF-8 included) in a URL. */
export function percentBytes(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => `%${b.toString(16).padStart(2, '0')}`).join('');
}

/** One path segment: an encoded hostile string, raw invalid UTF-8, or a plausible id. */
export const pathSegment: fc.Arbitrary<string> = fc.oneof(
  nastyString.filter((s) => s.length < 5000).map((s) => percentBytes(Buffer.from(s, 'utf8'))),
  fc.constantFrom('%ff%fe', '%ed%a0%80', '%00', '%', '%zz', '..', 'fuzz-other', 'fuzz-kb'),
  fc.uuid().map(String),
);

const queryKey = fc.oneof(
  fc.constantFrom('limit', 'cursor', 'status', 'after', 'before', 'order', 'thread_id', 'agent_id', 'conversation_id'),
  nastyString.filter((s) => s.length < 100),
);
const queryValue = fc.oneof(
  nastyString.filter((s) => s.length < 5000).map((s) => percentBytes(Buffer.from(s, 'utf8'))),
  extremeNumber.map((n) => encodeURIComponent(String(n))),
  fc.constantFrom('%ff', '%ed%a0%80', '%', 'a[b]=c', 'running,failed', 'completed'),
);

/** A query string (with its `?`), possibly empty, possibly repeating keys. */
export const queryString: fc.Arbitrary<string> = fc
  .array(fc.tuple(queryKey, queryValue), { maxLength: 4 })
  .map((pairs) =>
    pairs.length === 0 ? '' : `?${pairs.map(([k, v]) => `${percentBytes(Buffer.from(k, 'utf8'))}=${v}`).join('&')}`,
  );

/** A header value fetch can send (visible Latin-1: control characters are refused client-side). */
export const headerValue: fc.Arbitrary<string> = fc.oneof(
  fc.string({
    unit: fc
      .integer({ min: 0x20, max: 0xff })
      .filter((c) => c !== 0x7f)
      .map((c) => String.fromCharCode(c)),
    maxLength: 300,
  }),
  fc.constantFrom('', '0', '-1', '99999999999999999999', '1e23', 'x'.repeat(300)),
);
