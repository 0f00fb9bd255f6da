import { boundResult, prefixWithin, structuredRepeatsContent } from './result-bound';
import type { ToolResult } from './tool-result';

const size = (r: unknown) => Buffer.byteLength(JSON.stringify(r));
const textOf = (t: string) => ({ type: 'text', text: t });

describe('structuredRepeatsContent', () => {
  it.each([
    ['the JSON of a text block', [textOf('{"b":2,"a":1}')], { a: 1, b: 2 }, true],
    ['a one-key wrapper of the text (server-filesystem)', [textOf('file body')], { content: 'file body' }, true],
    ['a one-key wrapper of the blocks', [{ type: 'image', data: 'AA', mimeType: 'image/png' }], null, true],
    ['different data', [textOf('{"a":1}')], { a: 2 }, false],
    ['a wrapper of other text', [textOf('one')], { content: 'two' }, false],
  ])('%s → %s', (_why, content, sc, expected) => {
    const result: ToolResult = { is_error: false, content, structured_content: sc ?? { content } };
    expect(structuredRepeatsContent(result)).toBe(expected);
  });
});

describe('prefixWithin', () => {
  it('fits the JSON encoding, escapes and multi-byte characters included, never half a surrogate pair', () => {
    for (const s of ['x'.repeat(1000), '"\n'.repeat(500), 'é'.repeat(700), '😀'.repeat(300), '\u0001'.repeat(400)]) {
      for (const limit of [3, 10, 101, 999]) {
        const p = prefixWithin(s, limit);
        expect(size(p)).toBeLessThanOrEqual(limit);
        expect(s.startsWith(p)).toBe(true);
        expect(/[\uD800-\uDBFF]$/.test(p)).toBe(false);
      }
    }
    expect(prefixWithin('abc', 100)).toBe('abc');
  });
});

describe('boundResult', () => {
  it('leaves a result within the cap as it is', () => {
    const r: ToolResult = { is_error: false, content: [textOf('hi')], structured_content: { content: 'hi' } };
    expect(boundResult(r, 1024)).toBe(r);
  });

  it('drops a repeated structured copy first, so a result twice its text still arrives whole', () => {
    const body = 'x'.repeat(3000);
    const r: ToolResult = { is_error: false, content: [textOf(body)], structured_content: { content: body } };
    expect(boundResult(r, 4096)).toEqual({ is_error: false, content: [textOf(body)] });
  });

  it('cuts an over-cap result to fit, with a marker and the original size', () => {
    const body = 'y'.repeat(50_000);
    const r: ToolResult = {
      is_error: false,
      content: [textOf('head'), textOf(body), { type: 'image', data: 'A'.repeat(10_000), mimeType: 'image/png' }],
      structured_content: { content: body },
    };
    const out = boundResult(r, 8192);
    expect(size(out)).toBeLessThanOrEqual(8192);
    expect(out).toMatchObject({ truncated: true, original_bytes: size(r) });
    expect(out.structured_content).toBeUndefined();
    expect(out.content[0]).toEqual(textOf('head'));
    expect(String(out.content[1].text)).toMatch(/^y{6000,}$/);
    expect(out.content.at(-1)!.text).toMatch(
      /^\[tool result truncated: \d+ bytes of JSON is over the 8192-byte limit; text block cut at \d+ of 50000 bytes; 1 more block left out\./,
    );
  });

  it('names a binary block it cannot cut, and keeps structured content that is not a copy as JSON text', () => {
    const image = { is_error: false, content: [{ type: 'image', data: 'B'.repeat(9000), mimeType: 'image/gif' }] };
    const out = boundResult(image, 2048);
    expect(out.content).toHaveLength(1);
    expect(out.content[0].text).toContain('image block (image/gif, ');
    const structured = boundResult(
      { is_error: false, content: [], structured_content: { rows: 'z'.repeat(5000) } },
      2048,
    );
    expect(size(structured)).toBeLessThanOrEqual(2048);
    expect(String(structured.content[0].text)).toMatch(/^\{"rows":"z+$/);
  });
});
