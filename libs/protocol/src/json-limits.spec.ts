import {
  checkJson,
  joinPath,
  jsonBytes,
  jsonTextProblem,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
  stringProblem,
} from './json-limits';

function nested(levels: number, leaf: unknown = 1): unknown {
  let v: unknown = leaf;
  for (let i = 0; i < levels; i++) {
    v = { a: v };
  }
  return v;
}

describe('stringProblem', () => {
  it.each([
    ['plain', null],
    ['', null],
    ['emoji 😀 pair', null],
    ['rtl \u202Eevil', null],
    ['nul \u0000 inside', 'must not contain NUL characters'],
    ['lone high \uD800', 'must not contain lone UTF-16 surrogates (not valid Unicode)'],
    ['lone low \uDC00 x', 'must not contain lone UTF-16 surrogates (not valid Unicode)'],
    ['reversed pair \uDC00\uD800', 'must not contain lone UTF-16 surrogates (not valid Unicode)'],
  ])('%j → %s', (s, expected) => {
    expect(stringProblem(s)).toBe(expected);
  });
});

describe('checkJson', () => {
  it.each<[string, unknown, string, { field: string; rule: string } | null]>([
    ['a flat body', { a: 'x', b: [1, 2, { c: true }] }, '', null],
    [
      'NUL in a nested value',
      { event: { data: { foo: 'a\u0000b' } } },
      '',
      { field: 'event.data.foo', rule: 'must not contain NUL characters' },
    ],
    ['NUL in an array item', { xs: ['ok', '\u0000'] }, '', { field: 'xs[1]', rule: 'must not contain NUL characters' }],
    [
      'NUL in a key',
      { data: { 'k\u0000': 1 } },
      '',
      { field: 'data["k\\u0000"]', rule: 'key must not contain NUL characters' },
    ],
    [
      'a lone surrogate in a param',
      '\uD83D',
      'run_id',
      { field: 'run_id', rule: 'must not contain lone UTF-16 surrogates (not valid Unicode)' },
    ],
    [
      'Infinity (JSON 1e400)',
      { n: JSON.parse('1e400') as number },
      '',
      { field: 'n', rule: 'must be a finite number' },
    ],
    ['extreme finite numbers', { a: 1e308, b: -0, c: 2 ** 53 + 1, d: 1e23 }, '', null],
    ['a bare NUL body', '\u0000', '', { field: 'body', rule: 'must not contain NUL characters' }],
  ])('%s', (_name, value, root, expected) => {
    expect(checkJson(value, root)).toEqual(expected);
  });

  it('admits exactly the depth limit and refuses one level more, naming the field and the limit', () => {
    expect(checkJson(nested(MAX_JSON_DEPTH))).toBeNull();
    const p = checkJson(nested(MAX_JSON_DEPTH + 1));
    expect(p?.rule).toBe(`JSON nested deeper than ${MAX_JSON_DEPTH} levels (the limit)`);
    expect(p?.field).toMatch(/^a\.a\.a/);
  });

  it('refuses 20,000 levels without recursion (no RangeError) and keeps the field short', () => {
    const p = checkJson({ event: { data: nested(20_000) } });
    expect(p?.rule).toContain(`${MAX_JSON_DEPTH} levels`);
    expect(p?.field.startsWith('event.data.a')).toBe(true);
    expect(p!.field.length).toBeLessThanOrEqual(201);
    const arrays = JSON.parse('['.repeat(20_000) + ']'.repeat(20_000)) as unknown;
    expect(checkJson(arrays, 'xs')?.field.startsWith('xs[0][0]')).toBe(true);
  });

  it('handles wide values', () => {
    const wide = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, i]));
    expect(checkJson(wide)).toBeNull();
  });
});

describe('joinPath / jsonBytes', () => {
  it.each<[string, string | number, string]>([
    ['', 'a', 'a'],
    ['a', 'b', 'a.b'],
    ['a', 0, 'a[0]'],
    ['a', 'with space', 'a["with space"]'],
  ])('joinPath(%j, %j) = %j', (parent, key, out) => {
    expect(joinPath(parent, key)).toBe(out);
  });
  it('measures UTF-8 bytes of the JSON', () => {
    expect(jsonBytes({ a: 'é' })).toBe(Buffer.byteLength('{"a":"é"}'));
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(jsonBytes(cyclic)).toBe(Infinity);
  });
});

describe('jsonTextProblem', () => {
  const refused = `JSON holds more than ${MAX_JSON_VALUES} values (objects, arrays and comma-separated members; the limit)`;

  it('counts objects, arrays and commas outside strings, up to the limit inclusive', () => {
    expect(jsonTextProblem('{"a":[1,2],"b":{}}', 5)).toBeNull(); // { [ , , {
    expect(jsonTextProblem('{"a":[1,2],"b":{}}', 4)).toBe(
      'JSON holds more than 4 values (objects, arrays and comma-separated members; the limit)',
    );
  });

  it('ignores brackets and commas inside strings, escaped quotes and backslashes included', () => {
    expect(jsonTextProblem(JSON.stringify({ a: '[{,'.repeat(1000) }), 1)).toBeNull();
    expect(jsonTextProblem(JSON.stringify({ a: 'say "[,]" \\', b: '\\"{' }), 2)).toBeNull();
    expect(jsonTextProblem(JSON.stringify({ a: 'x\\', b: [1, 2] }), 3)).toBe(
      'JSON holds more than 3 values (objects, arrays and comma-separated members; the limit)',
    );
  });

  it.each([
    ['nested arrays', '['.repeat(MAX_JSON_VALUES + 1) + ']'.repeat(MAX_JSON_VALUES + 1)],
    ['empty objects side by side', `[${'{},'.repeat(MAX_JSON_VALUES)}{}]`],
    [
      'members of one object',
      JSON.stringify(Object.fromEntries(Array.from({ length: MAX_JSON_VALUES + 1 }, (_, i) => [`k${i}`, 0]))),
    ],
    ['an unterminated prefix JSON.parse would build', '['.repeat(MAX_JSON_VALUES + 1)],
  ])('refuses %s past the limit', (_name, text) => {
    expect(jsonTextProblem(text)).toBe(refused);
  });

  it('admits one long string whatever its length, and a text that ends inside a string', () => {
    expect(jsonTextProblem(JSON.stringify({ content: 'a, [b] {c} "d" \\ '.repeat(50_000) }))).toBeNull();
    expect(jsonTextProblem('{"a":"[[[[')).toBeNull();
  });
});
