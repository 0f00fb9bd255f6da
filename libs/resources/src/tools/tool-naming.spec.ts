import { nameTools, type ListedTool } from './tool-naming';

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

  it('skips a tool listed twice, a name too long, and one whose prefixed name is taken too', () => {
    const r = nameTools(
      'c',
      [tool('x'), tool('x'), tool('y'.repeat(181)), tool('z')],
      new Set(['z', 'c__z']),
      RESERVED,
    );
    expect(names(r)).toEqual([['x', 'x']]);
    expect(r.skipped.map((s) => s.name.slice(0, 5))).toEqual(['x', 'yyyyy', 'z']);
  });
});
