import { loadGatewayService } from './proto';
import { fromStruct, fromValue, toStruct, toValue, type JsonObject } from './struct';

describe('struct converters', () => {
  const sample: JsonObject = {
    s: 'text',
    empty: '',
    n: 1.5,
    zero: 0,
    neg: -3,
    t: true,
    f: false,
    nil: null,
    list: [1, 'a', null, false, { b: [] }, [[2]]],
    nested: { deeper: { x: 'y' }, none: {} },
  };

  it('encodes each JSON kind into the matching Value field', () => {
    expect(toValue(null)).toEqual({ nullValue: 'NULL_VALUE' });
    expect(toValue(2)).toEqual({ numberValue: 2 });
    expect(toValue('x')).toEqual({ stringValue: 'x' });
    expect(toValue(false)).toEqual({ boolValue: false });
    expect(toValue([1])).toEqual({ listValue: { values: [{ numberValue: 1 }] } });
    expect(toValue({ a: 'b' })).toEqual({ structValue: { fields: { a: { stringValue: 'b' } } } });
  });

  it('leaves out undefined keys', () => {
    expect(toStruct({ a: 1, b: undefined })).toEqual({ fields: { a: { numberValue: 1 } } });
  });

  it('round-trips in memory', () => {
    expect(fromStruct(toStruct(sample))).toEqual(sample);
  });

  it('round-trips through the real wire codec (proto-loader decoding, with `kind`)', () => {
    const connect = loadGatewayService().service.Connect;
    const message = {
      result: { run_id: 'r', type: 't', data: toStruct(sample), usage: toStruct({ total_tokens: 4 }) },
    };
    const decoded = connect.requestDeserialize(connect.requestSerialize(message)) as {
      result: { data: { fields: Record<string, { kind: string }> }; usage: unknown };
    };
    expect(decoded.result.data.fields.s.kind).toBe('stringValue');
    expect(decoded.result.data.fields.nil.kind).toBe('nullValue');
    expect(fromStruct(decoded.result.data)).toEqual(sample);
    expect(fromStruct(decoded.result.usage as never)).toEqual({ total_tokens: 4 });
  });

  it('decodes an unset Struct as {} and an unset Value as null', () => {
    expect(fromStruct(null)).toEqual({});
    expect(fromStruct(undefined)).toEqual({});
    expect(fromStruct({ fields: null })).toEqual({});
    expect(fromValue(null)).toBeNull();
    expect(fromValue({})).toBeNull();
    expect(fromValue({ kind: 'listValue', listValue: null })).toEqual([]);
  });
});
