import { LARGE_JSON_CHARS, json, writtenJson } from './unit';

describe('json: the JSON text of a large object is made once', () => {
  it('keeps the text of a large object for writtenJson, not of a small one', () => {
    const small = { text: 'hello', part: 0 };
    const large = { text: 'x'.repeat(LARGE_JSON_CHARS), part: 0 };
    expect(json(small)).toBe(JSON.stringify(small));
    expect(writtenJson(small)).toBeUndefined();
    const text = json(large);
    expect(text).toBe(JSON.stringify(large));
    expect(writtenJson(large)).toBe(text);
    expect(writtenJson({ ...large })).toBeUndefined(); // by object, not by value
  });

  it('null and undefined are SQL NULL', () => {
    expect(json(null)).toBeNull();
    expect(json(undefined)).toBeNull();
  });
});
