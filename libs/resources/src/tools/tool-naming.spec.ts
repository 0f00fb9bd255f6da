import { EXPOSED_NAME, hashedName, nameTools, type ListedTool } from './tool-naming';

const tool = (name: string): ListedTool => ({ name, description: '', parameters: { type: 'object' } });
const names = (r: ReturnType<typeof nameTools>) => r.named.map((t) => [t.name, t.tool_name]);
const RESERVED = new Set(['current_time', 'http_fetch']);

describe('tool naming (collision rule)', () => {
  it('keeps plain names that nobody holds', () => {
    expect(names(nameTools('a', [tool('echo'), tool('add')], new Set(), RESERVED))).toEqual([
      ['echo', 'echo'],
      ['add', 'add'],
    ]);
  });

  it('prefixes a name another source already holds, and built-in names always', () => {
    const r = nameTools('b', [tool('echo'), tool('current_time'), tool('other')], new Set(['echo']), RESERVED);
    expect(names(r)).toEqual([
      ['echo', 'b__echo'],
      ['current_time', 'b__current_time'],
      ['other', 'other'],
    ]);
    expect(r.skipped).toEqual([]);
  });

  it('skips a tool listed twice, a name over 255 characters, and one whose every candidate is taken', () => {
    const r = nameTools(
      'c',
      [tool('x'), tool('x'), tool('y'.repeat(256)), tool('z')],
      new Set(['z', 'c__z', hashedName('c', 'z')]),
      RESERVED,
    );
    expect(names(r)).toEqual([['x', 'x']]);
    expect(r.skipped.map((s) => s.name.slice(0, 5))).toEqual(['x', 'yyyyy', 'z']);
  });

  it('exposes only names valid for the model APIs: ≤ 64 characters of [A-Za-z0-9_-], unique, stable', () => {
    const long = 'a_tool_name_that_is_very_long_indeed_and_goes_on_past_sixty_four_characters';
    const sid = 'a-source-id-that-is-itself-rather-long';
    const listed = [
      tool(long),
      tool(`${long}_2`),
      tool('get.weather'),
      tool('get weather'),
      tool('échec'),
      tool('fits_alone_but_not_with_the_prefix_of_its_source_id'),
    ];
    const taken = new Set(['fits_alone_but_not_with_the_prefix_of_its_source_id']);
    const r = nameTools(sid, listed, taken, RESERVED);
    expect(r.skipped).toEqual([]);
    const exposed = r.named.map((t) => t.tool_name);
    for (const n of exposed) {
      expect(n).toMatch(EXPOSED_NAME);
    }
    expect(new Set(exposed).size).toBe(listed.length);
    // Calls use the original name; the same listing gives the same names (restarts, re-listings).
    expect(r.named.map((t) => t.name)).toEqual(listed.map((t) => t.name));
    expect(nameTools(sid, listed, taken, RESERVED).named.map((t) => t.tool_name)).toEqual(exposed);
    expect(exposed[0]).toBe(hashedName(sid, long));
    expect(exposed[0]).toMatch(/^a_tool_name_that_is_very_long_indeed_and_goes_on_past_s_[0-9a-f]{8}$/);
    expect(exposed[2]).toMatch(/^get_weather_[0-9a-f]{8}$/);
    expect(exposed[3]).toMatch(/^get_weather_[0-9a-f]{8}$/);
    expect(exposed[2]).not.toBe(exposed[3]);
    // A short name from another source still gets the readable prefixed form.
    expect(names(nameTools('b', [tool('echo')], new Set(['echo']), RESERVED))).toEqual([['echo', 'b__echo']]);
  });
});
