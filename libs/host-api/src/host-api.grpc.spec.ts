import { loadSync, type MethodDefinition } from '@grpc/proto-loader';
import { Root, common } from 'protobufjs';
import { LOADER_OPTIONS, protoPath } from '@libs/proto';
import { wireValue } from './host-api.grpc';

/*
 * StateGet answers its value as a tree of Value / Struct / ListValue messages (wireValue) instead
 * of plain JSON for the JSON wrappers to convert: the bytes on the wire must be the wrappers'.
 */
const definition = loadSync(protoPath(), LOADER_OPTIONS);
const service = definition['runnerhost.v1.HostApiService'] as unknown as Record<
  string,
  MethodDefinition<object, object>
>;
const { responseSerialize, responseDeserialize } = service.StateGet;
const VALUE = Root.fromJSON(common.get('google/protobuf/struct.proto')!).lookupType('google.protobuf.Value');
/** The answer as the adapter gave it before: plain JSON for the wrappers (a bare scalar as a Value, which they refuse). */
const plain = (value: unknown) =>
  responseSerialize({
    value:
      typeof value === 'string'
        ? VALUE.create({ stringValue: value })
        : typeof value === 'number'
          ? VALUE.create({ numberValue: value })
          : typeof value === 'boolean'
            ? VALUE.create({ boolValue: value })
            : (value ?? undefined),
  });
const built = (value: unknown) => responseSerialize({ value: wireValue(value) });

describe('wireValue (StateGet answer)', () => {
  const cases: [string, unknown][] = [
    [
      'an object of every JSON kind',
      { s: 'x', n: 42.5, neg: -1, b: true, f: false, nil: null, list: [1, 'a', null, [], {}] },
    ],
    ['nested objects and lists', { a: { b: { c: [{ d: [true, { e: 'é ✓' }] }] } }, empty: {}, none: [] }],
    ['an empty object', {}],
    ['a list', [1, 2, { three: 3 }]],
    ['a string', 'hello'],
    ['an empty string', ''],
    ['zero', 0],
    ['a boolean', false],
  ];
  it.each(cases)('%s: the same bytes as the JSON wrappers give', (_name, value) => {
    expect(built(value).equals(plain(value))).toBe(true);
    expect(responseDeserialize(built(value))).toEqual({ value });
  });

  it('keeps a "__proto__" key as a field (not a prototype)', () => {
    const value = JSON.parse('{"__proto__": {"x": 1}, "y": 2}') as Record<string, unknown>;
    const bytes = built(value);
    expect(bytes.equals(plain(value))).toBe(true);
    const decoded = (responseDeserialize(bytes) as { value: Record<string, unknown> }).value;
    expect(Object.keys(decoded)).toEqual(['__proto__', 'y']);
    expect(Object.getOwnPropertyDescriptor(decoded, '__proto__')?.value).toEqual({ x: 1 });
  });

  it('answers no value (a key never set) as the absent field, as before', () => {
    expect(wireValue(null)).toBeUndefined();
    expect(built(null).equals(plain(null))).toBe(true);
    expect(built(null).length).toBe(0);
  });

  it('refuses what JSON has not (no partial answer)', () => {
    expect(() => wireValue({ f: () => 1 })).toThrow('a function cannot be encoded as google.protobuf.Value');
  });
});
